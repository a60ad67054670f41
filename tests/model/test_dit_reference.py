"""The DiT against upstream's first-step velocities (v_c, v_u) and its own prepared/batched paths."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from reference_cases import load_case, one_thread  # noqa: F401 (autouse fixture)

from device_worker.model.dit import DiT, DiTConfig
from device_worker.model.load import load_dit

FP32_CASES = ["sampler_base_lyrics", "sampler_full_instrumental", "sampler_full_edit", "sampler_base_cfg0"]
VELOCITY_TOL = 5e-5  # README strict tolerance for v_c / v_u


def first_step(dit: DiT, t: dict[str, torch.Tensor], *, unconditional: bool) -> torch.Tensor:
    step_cond = torch.where(t["pred_mask"][None, :, None], 0, t["cond"])
    return dit(
        t["y0"], step_cond, t["text"], t["t_grid"][0],
        drop_audio_cond=unconditional, drop_text=unconditional,
        style_prompt=t["negative_style"] if unconditional else t["style"],
        start_time=t["start_time"], duration=t["song_duration"],
    )


@pytest.mark.parametrize("name", FP32_CASES)
@torch.inference_mode()
def test_first_step_velocities_match_upstream(reference_dir: Path, name: str) -> None:
    meta, t = load_case(reference_dir, name)
    dit = load_dit(reference_dir / meta["checkpoint"])
    err_c = (first_step(dit, t, unconditional=False) - t["v_c"]).abs().max().item()
    assert err_c <= VELOCITY_TOL, f"v_c max-abs error {err_c:.3g}"
    if "v_u" in t:
        err_u = (first_step(dit, t, unconditional=True) - t["v_u"]).abs().max().item()
        assert err_u <= VELOCITY_TOL, f"v_u max-abs error {err_u:.3g}"


@pytest.mark.parametrize("name", FP32_CASES)
@torch.inference_mode()
def test_exact_buffers_match_their_reference_and_differ_from_upstream(reference_dir: Path, name: str) -> None:
    meta, t = load_case(reference_dir, name)
    dit = load_dit(reference_dir / meta["checkpoint"], exact_buffers=True)
    v = first_step(dit, t, unconditional=False)
    assert (v - t["v_c_exact_buffers"]).abs().max().item() <= VELOCITY_TOL
    # the fp16-rounded tables are upstream behaviour; exact ones must be told apart at this tolerance
    assert (v - t["v_c"]).abs().max().item() > 3 * VELOCITY_TOL


@torch.inference_mode()
def test_fp16_upstream_mode_first_step(reference_dir: Path) -> None:
    meta, t = load_case(reference_dir, "sampler_full_fp16")
    dit = load_dit(reference_dir / meta["checkpoint"], dtype=torch.float16, half_mode="upstream")
    h = {k: (v.half() if v.is_floating_point() else v) for k, v in t.items()}
    for unconditional, ref in ((False, t["v_c"]), (True, t["v_u"])):
        err = (first_step(dit, h, unconditional=unconditional).float() - ref.float()).abs().max().item()
        assert err <= 1e-2, f"fp16 velocity error {err:.3g}"


@torch.inference_mode()
def test_prepared_forward_equals_forward_across_steps(reference_dir: Path) -> None:
    meta, t = load_case(reference_dir, "sampler_full_edit")
    dit = load_dit(reference_dir / meta["checkpoint"])
    step_cond = torch.where(t["pred_mask"][None, :, None], 0, t["cond"])
    cache = dit.prepare(step_cond, t["text"], t["style"], t["start_time"], t["song_duration"])
    x = t["y0"]
    for time in t["t_grid"][[0, 7, 30]]:  # one cache serves every step
        full = dit(x, step_cond, t["text"], time, style_prompt=t["style"],
                   start_time=t["start_time"], duration=t["song_duration"])
        assert torch.equal(dit.forward_prepared(x, time, cache), full)
        x = x + 0.1 * full


@torch.inference_mode()
def test_batched_guidance_equals_two_forwards(reference_dir: Path) -> None:
    meta, t = load_case(reference_dir, "sampler_full_edit")
    dit = load_dit(reference_dir / meta["checkpoint"])
    step_cond = torch.where(t["pred_mask"][None, :, None], 0, t["cond"])
    cache = dit.prepare(
        torch.cat((step_cond, torch.zeros_like(step_cond))),
        torch.cat((t["text"], torch.zeros_like(t["text"]))),
        torch.cat((t["style"], t["negative_style"])),
        t["start_time"].repeat(2), t["song_duration"].repeat(2),
    )
    v_c, v_u = dit.forward_prepared(torch.cat((t["y0"], t["y0"])), t["t_grid"][5], cache).chunk(2)
    kw = dict(start_time=t["start_time"], duration=t["song_duration"])
    sep_c = dit(t["y0"], step_cond, t["text"], t["t_grid"][5], style_prompt=t["style"], **kw)
    sep_u = dit(t["y0"], step_cond, t["text"], t["t_grid"][5], drop_audio_cond=True, drop_text=True,
                style_prompt=t["negative_style"], **kw)
    assert (v_c - sep_c).abs().max().item() <= 1e-5
    assert (v_u - sep_u).abs().max().item() <= 1e-5
    assert (sep_c - sep_u).abs().max().item() > 1e-2  # the branches really differ


@torch.inference_mode()
def test_causal_flag_masks_future_frames() -> None:
    torch.manual_seed(0)
    for causal in (True, False):
        block = DiT(DiTConfig(dim=128, depth=2, ff_mult=2, conv_layers=1, causal=causal)).transformer_blocks[0]
        x = torch.randn(1, 16, 128)
        cos, sin = torch.ones(1, 1, 16, 4), torch.zeros(1, 1, 16, 4)
        y = x.clone()
        y[:, -1] += 1.0  # change only the last frame
        changed = (block(x, cos, sin) - block(y, cos, sin))[:, :-1].abs().max().item()
        assert (changed == 0.0) if causal else (changed > 1e-4)
