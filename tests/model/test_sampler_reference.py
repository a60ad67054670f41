"""The sampler against upstream `CFM.sample` runs, plus seeds, cancelling, edit and precision modes."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from reference_cases import FP32_CASES, load_case, max_err, one_thread, song_kwargs  # noqa: F401 (autouse fixture)

from device_worker.model.load import load_dit
from device_worker.model.sampling import (
    Backbone,
    SamplingStopped,
    finish_song,
    make_noise,
    sample,
    start_song,
    step_song,
)
from device_worker.protocol import SongParams


def run(dit, meta, t) -> tuple[dict, torch.Tensor]:
    state = start_song(dit, **song_kwargs(meta, t))
    seen = {"y0": state.x.clone(), "t_grid": state.t.clone(), "pred_mask": state.pred_mask.clone()}
    while not state.done:
        step_song(dit, state)
        if state.k == 16:
            seen["x_step16"] = state.x.clone()
    return seen, finish_song(dit, state)


@pytest.mark.parametrize("name", FP32_CASES)
def test_fp32_case_matches_upstream(reference_dir: Path, name: str) -> None:
    meta, t = load_case(reference_dir, name)
    seen, final = run(load_dit(reference_dir / meta["checkpoint"]), meta, t)
    assert torch.equal(seen["y0"], t["y0"]), "noise differs from manual_seed(seed); randn(N, 64)"
    assert torch.equal(seen["t_grid"], t["t_grid"])
    assert torch.equal(seen["pred_mask"], t["pred_mask"])
    assert max_err(seen["x_step16"], t["x_step16"]) <= 1e-4
    assert max_err(final, t["final"]) <= 2e-5 * t["final"].abs().max().item()
    outside = ~t["pred_mask"]
    assert torch.equal(final[:, outside], t["cond"][:, outside])  # the reference is pasted back bitwise


@pytest.mark.parametrize("name", ["sampler_base_lyrics", "sampler_full_edit"])
def test_exact_buffers_case(reference_dir: Path, name: str) -> None:
    meta, t = load_case(reference_dir, name)
    _, final = run(load_dit(reference_dir / meta["checkpoint"], exact_buffers=True), meta, t)
    scale = t["final"].abs().max().item()
    assert max_err(final, t["final_exact_buffers"]) <= 2e-5 * scale
    assert max_err(final, t["final"]) > 2e-5 * scale  # distinguishable from upstream's rounded tables


def test_fp16_upstream_case(reference_dir: Path) -> None:
    meta, t = load_case(reference_dir, "sampler_full_fp16")
    dit = load_dit(reference_dir / meta["checkpoint"], dtype=torch.float16, half_mode="upstream")
    seen, final = run(dit, meta, t)
    assert seen["y0"].dtype == torch.float16 and torch.equal(seen["y0"], t["y0"])
    assert torch.equal(seen["t_grid"], t["t_grid"])
    assert max_err(final, t["final"]) <= 5e-3 * t["final"].float().abs().max().item()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_mixed_precision_keeps_state_in_fp32_and_tracks_fp32(tiny_dit_full: Path, dtype) -> None:
    text = torch.randint(0, 364, (1, 48))
    kw = dict(text=text, style=torch.randn(1, 512), negative_style=torch.randn(1, 512), duration=48,
              params=SongParams(steps=8, seed=5))
    ref = sample(load_dit(tiny_dit_full), **kw)
    dit = load_dit(tiny_dit_full, dtype=dtype, half_mode="mixed")
    state = start_song(dit, **kw)
    assert state.x.dtype == torch.float32 and state.t.dtype == torch.float32
    out = sample(dit, **kw)
    assert out.dtype == torch.float32
    assert max_err(out, ref) <= 0.05 * ref.abs().max().item()


@pytest.fixture(scope="module")
def tiny(tiny_dit_base: Path):
    return load_dit(tiny_dit_base)


def small_song(n: int = 32, b: int = 1, **settings) -> dict:
    """A 5-step song's sampler arguments; `settings` are its other `SongParams` (seed, cfg, ...)."""
    g = torch.Generator().manual_seed(0)
    return dict(text=torch.randint(0, 364, (b, n), generator=g), style=torch.randn(b, 512, generator=g),
                negative_style=torch.randn(1, 512, generator=g), duration=n, params=SongParams(steps=5, **settings))


def test_seed_determinism_and_recorded_seed(tiny) -> None:
    a = sample(tiny, **small_song(seed=7))
    assert torch.equal(a, sample(tiny, **small_song(seed=7)))
    assert not torch.equal(a, sample(tiny, **small_song(seed=8)))
    state = start_song(tiny, **small_song(seed=None))
    assert isinstance(state.seed, int)
    while not state.done:
        step_song(tiny, state)
    assert torch.equal(finish_song(tiny, state), sample(tiny, **small_song(seed=state.seed)))


def test_noise_follows_upstream_per_item_seeding(tiny) -> None:
    state = start_song(tiny, **small_song(b=2, seed=3))
    torch.manual_seed(3)
    assert torch.equal(state.x[0], torch.randn(32, 64)) and torch.equal(state.x[1], state.x[0])
    per_item = start_song(tiny, **small_song(b=2, seed=[3, 4]))
    assert per_item.seed == [3, 4] and torch.equal(per_item.x, make_noise([3, 4], 32))
    noise = torch.randn(2, 32, 64)
    assert torch.equal(start_song(tiny, **small_song(b=2), noise=noise).x, noise)


def test_callback_reports_progress_and_cancels(tiny) -> None:
    calls = []
    sample(tiny, **small_song(seed=1), callback=lambda k, total: calls.append((k, total)))
    assert calls == [(1, 4), (2, 4), (3, 4), (4, 4)]
    with pytest.raises(SamplingStopped):
        sample(tiny, **small_song(seed=1), callback=lambda k, total: k < 2)


def test_cfg_zero_skips_unconditional_branch(tiny) -> None:
    assert start_song(tiny, **small_song(seed=1, cfg=0.0)).cache.batch == 1
    assert start_song(tiny, **small_song(seed=1)).cache.batch == 2


def test_cond_is_padded_or_cropped_and_pasted_outside_segments(tiny) -> None:
    cond = torch.randn(1, 20, 64)
    segments = [(4, 10), (25, 40)]  # the second one runs past the end: clipped by the frame range
    short = sample(tiny, **small_song(seed=2, edit_segments=segments), cond=cond)
    padded = torch.nn.functional.pad(cond, (0, 0, 0, 12))
    assert torch.equal(short, sample(tiny, **small_song(seed=2, edit_segments=segments), cond=padded))
    long = torch.cat((padded, torch.randn(1, 9, 64)), dim=1)
    assert torch.equal(short, sample(tiny, **small_song(seed=2, edit_segments=segments), cond=long))
    keep = torch.ones(32, dtype=torch.bool)
    keep[4:10] = keep[25:] = False
    assert torch.equal(short[:, keep], padded[:, keep])
    assert not torch.equal(short[:, 4:10], padded[:, 4:10])


def test_sway_shifts_the_time_grid(tiny) -> None:
    t = start_song(tiny, **small_song(seed=1, sway=-1.0)).t
    plain = torch.linspace(0, 1, 5)
    assert torch.allclose(t, plain - (torch.cos(torch.pi / 2 * plain) - 1 + plain))
    assert t[0] == 0 and abs(t[-1].item() - 1) < 1e-6


def test_text_must_have_one_id_per_frame(tiny) -> None:
    song = small_song()
    song["duration"] = 31
    with pytest.raises(ValueError, match="one per frame"):
        start_song(tiny, **song)


class CountingBackbone:
    """The tiny DiT behind the Backbone protocol, counting what the sampler asks of it."""

    def __init__(self, dit) -> None:
        self.dit, self.config, self.device, self.state_dtype = dit, dit.config, dit.device, dit.state_dtype
        self.prepared, self.released = [], []

    def prepare(self, *args):
        self.prepared.append(self.dit.prepare(*args))
        return self.prepared[-1]

    def forward_prepared(self, x, time, cache):
        return self.dit.forward_prepared(x, time, cache)

    def release(self, cache) -> None:
        self.released.append(cache)


def test_any_backbone_runs_the_sampler_and_each_cache_is_released_once(tiny) -> None:
    net = CountingBackbone(tiny)
    assert isinstance(net, Backbone) and isinstance(tiny, Backbone)
    assert torch.equal(sample(net, **small_song(seed=3)), sample(tiny, **small_song(seed=3)))
    assert [id(c) for c in net.released] == [id(c) for c in net.prepared] and len(net.prepared) == 1  # by finish
    with pytest.raises(SamplingStopped):
        sample(net, **small_song(seed=3), callback=lambda k, total: False)
    assert [id(c) for c in net.released] == [id(c) for c in net.prepared] and len(net.prepared) == 2  # cancelled
