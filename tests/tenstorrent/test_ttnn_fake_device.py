"""The card code (tt_dit, tt_trace, tt_vae) run against the torch-backed ttnn stand-in (tests/fake_ttnn).

What this pins without a card: the device code's logic (layouts, shapes, padding, masks, branch rows,
weight layouts as consumed by the ops, trace I/O discipline, freeing) equals the device-shaped reference
exactly when the stand-in stores float32, and stays close when it rounds like bf16. What it cannot pin:
the real kernels' numerics and speed (tests/tenstorrent/test_ttnn_hardware.py, on a p100a).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from ttnn_fixtures import CARD_CFG, fake_ttnn, inputs, one_thread, pcc, random_dit  # noqa: F401

from device_worker.backends.ttnn.convert import convert_dit, convert_vae
from device_worker.backends.ttnn.precision import DRPrecision
from device_worker.backends.ttnn.reference import DeviceShapedDiT
from device_worker.backends.ttnn.reference_vae import DeviceShapedOobleck
from device_worker.model.vae import load_vae


@pytest.fixture(scope="module")
def card_dit():
    dit = random_dit(11, **CARD_CFG)
    return dit, convert_dit(dit.state_dict(), dit.config)


def open_dev(fake, **kw):
    return fake.open_mesh_device(l1_small_size=98304, **kw)


def test_dit_equals_the_reference_and_the_core(fake_ttnn, card_dit) -> None:  # noqa: F811
    from device_worker.backends.ttnn.tt_dit import TtDiT

    dit, w = card_dit
    tt = TtDiT(open_dev(fake_ttnn), dit, w, DRPrecision())
    x, cond, text, style = inputs(2, 200, 1)
    taps: list[torch.Tensor] = []
    got = tt.forward(x, 0.42, tt.prepare(cond, text, style), taps=taps)
    ref = DeviceShapedDiT(dit, w)
    ref_taps: list[torch.Tensor] = []
    want = ref.forward(x, 0.42, ref.prepare(cond, text, style), taps=ref_taps)
    assert len(taps) == len(ref_taps) == dit.config.depth  # the per-block taps the hardware test compares
    for a, b in zip(taps, ref_taps, strict=True):
        assert (a[:, :200] - b).abs().max().item() <= 1e-5 * b.abs().max().item()
    assert got.shape == (2, 200, 64) and got.dtype == torch.float32
    assert (got - want).abs().max().item() <= 1e-5 * want.abs().max().item()
    with torch.inference_mode():
        core = dit.forward_prepared(x, 0.42, dit.prepare(cond, text, style))
    assert (got - core).abs().max().item() <= 2e-5 * core.abs().max().item()


def test_bf16_storage_keeps_the_call_close(fake_ttnn, card_dit, monkeypatch) -> None:  # noqa: F811
    from device_worker.backends.ttnn.tt_dit import TtDiT

    monkeypatch.setattr(fake_ttnn.core, "EXACT", False)
    dit, w = card_dit
    tt = TtDiT(open_dev(fake_ttnn), dit, w, DRPrecision())
    x, cond, text, style = inputs(2, 200, 2)
    ref = DeviceShapedDiT(dit, w)
    want = ref.forward(x, 0.3, ref.prepare(cond, text, style))
    got = tt.forward(x, 0.3, tt.prepare(cond, text, style))
    assert (got - want).abs().max().item() > 0  # the stand-in did round
    assert pcc(got, want) >= 0.9999


def test_two_batch1_calls_equal_one_batch2_call_and_buckets_agree(fake_ttnn, card_dit) -> None:  # noqa: F811
    from device_worker.backends.ttnn.tt_dit import TtDiT

    dit, w = card_dit
    tt = TtDiT(open_dev(fake_ttnn), dit, w, DRPrecision(batch_branches=False))
    x, cond, text, style = inputs(2, 130, 3)
    both = tt.forward(x, 0.2, tt.prepare(cond, text, style))
    rows = [tt.forward(x[i : i + 1], 0.2, tt.prepare(cond[i : i + 1], text[i : i + 1], style[i : i + 1]))
            for i in range(2)]
    assert (torch.cat(rows) - both).abs().max().item() <= 1e-5 * both.abs().max().item()
    wider = tt.forward(x, 0.2, tt.prepare(cond, text, style, seq=512))  # another bucket, same velocities
    assert (wider - both).abs().max().item() <= 1e-5 * both.abs().max().item()
    masked = TtDiT(tt.dev, dit, w, DRPrecision(windowed_attention=False))  # [b, 1, s, s] additive mask instead
    assert (masked.forward(x, 0.2, masked.prepare(cond, text, style)) - both).abs().max().item() <= 1e-5 * both.abs().max().item()


def test_trace_replays_equal_eager_calls_across_songs(fake_ttnn, card_dit) -> None:  # noqa: F811
    from device_worker.backends.ttnn.tt_dit import TtDiT

    dit, w = card_dit
    dev = open_dev(fake_ttnn, trace_region_size=1 << 20)
    eager = TtDiT(dev, dit, w, DRPrecision())
    traced = TtDiT(dev, dit, w, DRPrecision(trace=True))
    times = traced.tracer.capture([(256, 2)])
    assert list(times) == [(256, 2, 3)]
    songs = [inputs(2, 200, 4), inputs(2, 180, 5)]
    t_songs = [traced.prepare(c, t, s) for _, c, t, s in songs]
    e_songs = [eager.prepare(c, t, s) for _, c, t, s in songs]
    assert all(not s.dev and s.host for s in t_songs)  # trace mode keeps songs on the host
    for k, i in enumerate([0, 1, 0, 0, 1]):  # alternate songs: slots must be reloaded on every switch
        x = songs[i][0] * (1 + k)
        assert torch.equal(traced.forward(x, 0.1 * k, t_songs[i]), eager.forward(x, 0.1 * k, e_songs[i])), k
    exact = inputs(2, 256, 6)  # frames == bucket: two windows, no trace for it -> eager from the host
    s = traced.prepare(*exact[1:])
    assert torch.equal(traced.forward(exact[0], 0.5, s), eager.forward(exact[0], 0.5, eager.prepare(*exact[1:])))
    with pytest.raises(RuntimeError, match="once"):
        traced.tracer.capture([(512, 2)])


def test_head_width_must_fill_a_tile(fake_ttnn) -> None:  # noqa: F811
    from device_worker.backends.ttnn.tt_dit import TtDiT

    dit = random_dit(0, dim=128)
    with pytest.raises(ValueError, match="multiple of 32"):
        TtDiT(open_dev(fake_ttnn), dit, convert_dit(dit.state_dict(), dit.config), DRPrecision())


def test_bfp8_weights_quantise_matmul_inputs_and_run(fake_ttnn, card_dit) -> None:  # noqa: F811
    from device_worker.backends.ttnn.tt_dit import TtDiT

    dit, w = card_dit
    tt = TtDiT(open_dev(fake_ttnn), dit, w, DRPrecision.from_flags(bfp8=True, hifi2=True))
    assert tt.layers[0]["wqkv"].dtype == fake_ttnn.bfloat8_b and tt.layers[0]["wqkv"].layout == fake_ttnn.TILE_LAYOUT
    x, cond, text, style = inputs(2, 64, 7)
    ref = DeviceShapedDiT(dit, w)
    want = ref.forward(x, 0.3, ref.prepare(cond, text, style))
    assert pcc(tt.forward(x, 0.3, tt.prepare(cond, text, style)), want) >= 0.9999


def test_songs_free_everything_they_allocate(fake_ttnn, card_dit) -> None:  # noqa: F811
    from device_worker.backends.ttnn.tt_dit import TtDiT

    dit, w = card_dit
    dev = open_dev(fake_ttnn)
    tt = TtDiT(dev, dit, w, DRPrecision())
    before = len(dev.live)
    x, cond, text, style = inputs(2, 100, 8)
    song = tt.prepare(cond, text, style)
    tt.forward(x, 0.0, song)
    tt.forward(x, 0.5, song)
    assert len(dev.live) > before  # the song's tensors are resident between steps
    tt.release(song)
    assert len(dev.live) == before  # and every intermediate of every call was deallocated


def test_vae_equals_the_reference_and_prepares_weights_per_length(fake_ttnn, tiny_vae: Path) -> None:  # noqa: F811
    from device_worker.backends.ttnn.tt_vae import TtOobleck

    w = convert_vae(load_vae(tiny_vae).state_dict())
    dev = open_dev(fake_ttnn)
    tv = TtOobleck(dev, w, DRPrecision())
    ref = DeviceShapedOobleck(w)
    lat = torch.randn(64, 40, generator=torch.Generator().manual_seed(1))
    tv.warm(16)
    before = len(dev.live)
    blocks = list(tv.decode_windows(lat, 16, 4))
    want = list(ref.decode_windows(lat, 16, 4))
    assert [b.shape for b in blocks] == [b.shape for b in want]
    assert (torch.cat(blocks, -1) - torch.cat(want, -1)).abs().max().item() <= 1e-5
    assert len(dev.live) == before  # windows after warm-up allocate nothing that stays
    n_convs = 2 + sum(1 + 2 * len(b.units) for b in tv.plan.blocks)
    assert tv.lengths == {16} and len(tv.prepared) == n_convs  # one prepared weight per conv for this window


def test_stand_in_enforces_the_card_rules(fake_ttnn) -> None:  # noqa: F811
    t = fake_ttnn
    dev = open_dev(t)
    with pytest.raises(RuntimeError, match="TILE for bfloat8_b"):
        t.from_torch(torch.ones(32, 32), dtype=t.bfloat8_b, layout=t.ROW_MAJOR_LAYOUT)
    host = t.from_torch(torch.ones(1, 1, 32, 32), dtype=t.bfloat16, layout=t.TILE_LAYOUT)
    assert tuple(t.from_torch(torch.ones(1, 1, 50, 70), layout=t.TILE_LAYOUT).padded_shape) == (1, 1, 64, 96)
    with pytest.raises(RuntimeError, match="must be on device"):
        t.add(host, host)
    a = t.from_torch(torch.ones(1, 1, 32, 64), dtype=t.bfloat16, layout=t.TILE_LAYOUT, device=dev)
    wf = t.from_torch(torch.ones(64, 64), dtype=t.float32, layout=t.TILE_LAYOUT, device=dev)
    with pytest.raises(RuntimeError, match="must match weight dtype"):
        t.experimental.minimal_matmul(a, wf)
    t.deallocate(a)
    with pytest.raises(RuntimeError, match="deallocated"):
        t.silu(a)
    b = t.from_torch(torch.ones(1, 1, 32, 32), dtype=t.bfloat16, layout=t.TILE_LAYOUT, device=dev)
    dev2 = open_dev(t, trace_region_size=1 << 20)
    c = t.from_torch(torch.ones(1, 1, 32, 32), dtype=t.bfloat16, layout=t.TILE_LAYOUT, device=dev2)
    t.begin_trace_capture(dev2)
    with pytest.raises(RuntimeError, match="program cache miss"):
        t.mish(c)
    with pytest.raises(RuntimeError, match="during trace capture"):
        t.from_torch(torch.ones(1, 1, 32, 32), layout=t.TILE_LAYOUT, device=dev2)
    assert t.silu(b) is not None  # another device's ops are unaffected
