"""The device-shaped torch reference equals the model core in float32, for every bucket it is padded to."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from ttnn_fixtures import inputs, one_thread, pcc, random_dit  # noqa: F401

from device_worker.backends.ttnn.convert import convert_vae
from device_worker.backends.ttnn.reference import DeviceShapedDiT, pad_rows
from device_worker.backends.ttnn.reference_vae import DeviceShapedOobleck
from device_worker.model.load import load_dit
from device_worker.model.sampling import make_noise, sample
from device_worker.model.vae import load_vae
from device_worker.protocol import SongParams

TOL = 2e-5  # float32: only the order of additions differs (split input projection, unfolded conv)


def core_velocity(dit, x, cond, text, style, time):
    with torch.inference_mode():
        return dit.forward_prepared(x, time, dit.prepare(cond, text, style))


def check(dit, n: int, buckets: list[int], seed: int = 0, tol: float = TOL) -> None:
    x, cond, text, style = inputs(2, n, seed)
    want = core_velocity(dit, x, cond, text, style, 0.37)
    ref = DeviceShapedDiT(dit)
    got = [ref.forward(x, 0.37, ref.prepare(cond, text, style, seq=s)) for s in buckets]
    scale = want.abs().max().item()
    for s, v in zip(buckets, got, strict=True):
        assert v.shape == want.shape
        err = (v - want).abs().max().item()
        assert err <= tol * max(1.0, scale), f"bucket {s}: max-abs error {err:.3g} (scale {scale:.3g})"
    for v in got[1:]:  # bucket invariance: padding never reaches a real row
        assert (v - got[0]).abs().max().item() <= tol * max(1.0, scale)


@pytest.mark.parametrize("which", ["full", "base"])
def test_release_layout_checkpoints_match_the_core_in_every_bucket(which: str, tiny_dit_full: Path,
                                                                   tiny_dit_base: Path) -> None:
    dit = load_dit(tiny_dit_full if which == "full" else tiny_dit_base)
    check(dit, 200, [200, 256, 512])


@pytest.mark.parametrize("overrides", [
    dict(dim=128, depth=3, ff_mult=2),
    dict(dim=256, depth=2, conv_layers=2, max_frames=2048),
    dict(dim=128, depth=2, causal=True, duration_embed=False, text_max_pos=4096),  # v1.0: causal attention
])
def test_random_configs_match_the_core_and_are_bucket_invariant(overrides: dict) -> None:
    check(random_dit(1, std=0.05, **overrides), 77, [77, 96, 256, 320])


def test_exact_buffers_follow_the_core() -> None:
    dit = random_dit(2, std=0.05)
    dit.exact_buffers = True
    check(dit, 90, [90, 256])


def test_lyric_features_must_be_computed_on_the_unpadded_sequence() -> None:
    # GRN normalises over time: features of a zero-padded id sequence differ, so the reference pads the
    # FEATURES, never the ids. This pins why (if it ever stops holding, the rule can be relaxed).
    dit = random_dit(5, std=0.2)
    ref = DeviceShapedDiT(dit)
    _, _, text, _ = inputs(1, 60, 5)
    right = pad_rows(ref.text_features(text), 256)[:, :60]
    wrong = ref.text_features(torch.nn.functional.pad(text, (0, 196)))[:, :60]
    assert (right - wrong).abs().max().item() > 1e-3


def test_guided_song_through_the_reference_equals_the_sampler(tiny_dit_full: Path) -> None:
    dit = load_dit(tiny_dit_full)
    n, steps, cfg = 150, 4, 4.0
    _, _, text, style = inputs(1, n, 9)
    neg = torch.randn(1, 512, generator=torch.Generator().manual_seed(10))
    want = sample(dit, text=text, style=style, negative_style=neg, duration=n,
                  params=SongParams(steps=steps, cfg=cfg, seed=3))
    ref = DeviceShapedDiT(dit)
    song = ref.prepare(torch.zeros(2, n, 64), torch.cat((text, torch.zeros_like(text))), torch.cat((style, neg)))
    x, t = make_noise([3], n), torch.linspace(0, 1, steps)
    for k in range(steps - 1):
        v_c, v_u = ref.forward(torch.cat((x, x)), t[k], song).chunk(2)
        x = x + (t[k + 1] - t[k]) * (v_c + (v_c - v_u) * cfg)
    assert (x - want).abs().max().item() <= 1e-4 * want.abs().max().item()


def test_bf16_weight_option_rounds_and_stays_close(tiny_dit_full: Path) -> None:
    dit = load_dit(tiny_dit_full)
    x, cond, text, style = inputs(2, 100, 4)
    want = core_velocity(dit, x, cond, text, style, 0.5)
    for kw in (dict(weight_dtype=torch.bfloat16), dict(weight_dtype=torch.bfloat16, act_bf16=True)):
        ref = DeviceShapedDiT(dit, **kw)
        got = ref.forward(x, 0.5, ref.prepare(cond, text, style))
        assert (got - want).abs().max().item() > 1e-5  # the option does round
        assert pcc(got, want) >= 0.999, kw


def test_taps_give_one_residual_per_block() -> None:
    dit = random_dit(6, depth=3)
    x, cond, text, style = inputs(1, 40, 6)
    ref = DeviceShapedDiT(dit)
    taps: list[torch.Tensor] = []
    ref.forward(x, 0.1, ref.prepare(cond, text, style), taps=taps)
    assert len(taps) == 3 and taps[0].shape == (1, 40, dit.config.dim)


def test_device_shaped_vae_equals_the_core_decoder(tiny_vae: Path) -> None:
    vae = load_vae(tiny_vae)
    ref = DeviceShapedOobleck(convert_vae(vae.state_dict()))
    assert ref.plan.hop == 2048 and len(ref.plan.blocks) == 5
    lat = torch.randn(1, 64, 24, generator=torch.Generator().manual_seed(0))
    want = vae.decode(lat)[0]
    torch.testing.assert_close(ref.decode(lat[0]), want, rtol=1e-5, atol=1e-5 * want.abs().max().item())
    blocks = list(ref.decode_windows(lat[0], 16, 4))
    want_blocks = list(vae.decode_windows(lat, 16, 4))
    assert [b.shape[-1] for b in blocks] == [b.shape[-1] for b in want_blocks]
    torch.testing.assert_close(torch.cat(blocks, -1), torch.cat(want_blocks, -1)[0], rtol=1e-5, atol=1e-5)
