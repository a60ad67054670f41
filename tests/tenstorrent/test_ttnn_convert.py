"""Weight conversion for the card: exact round trips, the semantics of each layout, and the disk cache."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from ttnn_fixtures import one_thread, random_dit  # noqa: F401

from device_worker.backends.ttnn.convert import (
    WeightCache,
    cache_key,
    conv_group_fold,
    conv_group_unfold,
    convert_dit,
    convert_vae,
    permute_head_rows,
    swiglu_deinterleave,
    swiglu_interleave,
    unconvert_dit,
    unconvert_vae_convs,
)
from device_worker.backends.ttnn.reference import conv_unfolded, rope_adjacent, swiglu_tiles
from device_worker.model.dit import apply_rope
from device_worker.model.load import load_dit
from device_worker.model.vae import load_vae


def _round_trip(dit) -> None:
    sd = dit.state_dict()
    back = unconvert_dit(convert_dit(sd, dit.config), dit.config)
    assert back, "nothing converted"
    for k, v in back.items():
        assert torch.equal(v, sd[k].float()), k  # bit for bit
    # every weight the card uses came through (the host keeps only embeddings, time MLPs and norm_out)
    host_only = ("time_embed.", "start_time_embed.", "duration_time_embed.", "text_embed.", "norm_out.")
    assert set(sd) - set(back) == {k for k in sd if k.startswith(host_only)}


def test_release_checkpoint_round_trips(tiny_dit_full: Path, tiny_dit_base: Path) -> None:
    _round_trip(load_dit(tiny_dit_full))
    _round_trip(load_dit(tiny_dit_base))


@pytest.mark.parametrize("overrides", [dict(dim=1024, depth=1), dict(dim=256, depth=3, ff_mult=2)])
def test_random_configs_round_trip(overrides: dict) -> None:
    _round_trip(random_dit(3, **overrides))


def test_qk_row_permutation_keeps_attention_scores() -> None:
    torch.manual_seed(0)
    hd, d, n = 64, 128, 10
    wq, wk, x = torch.randn(d, d), torch.randn(d, d), torch.randn(n, d)
    angles = torch.arange(n).float()[:, None] * (1.0 / 10000 ** (torch.arange(0, hd, 2).float() / hd))
    cos_h, sin_h = torch.cat((angles, angles), -1).cos(), torch.cat((angles, angles), -1).sin()  # rotate-half
    cos_a, sin_a = angles.repeat_interleave(2, -1).cos(), angles.repeat_interleave(2, -1).sin()  # adjacent
    heads = lambda t: t.view(n, d // hd, hd).transpose(0, 1)  # noqa: E731
    q0, k0 = apply_rope(heads(x @ wq.t()), cos_h, sin_h), apply_rope(heads(x @ wk.t()), cos_h, sin_h)
    wq1, wk1 = permute_head_rows(wq, hd), permute_head_rows(wk, hd)
    q1, k1 = rope_adjacent(heads(x @ wq1.t()), cos_a, sin_a), rope_adjacent(heads(x @ wk1.t()), cos_a, sin_a)
    torch.testing.assert_close(q1 @ k1.transpose(-1, -2), q0 @ k0.transpose(-1, -2), rtol=1e-4, atol=1e-3)
    assert not torch.allclose(q1, q0)  # the layout really changed
    assert torch.equal(permute_head_rows(wq1, hd, inverse=True), wq)


def test_swiglu_interleave_feeds_the_fused_matmul() -> None:
    torch.manual_seed(1)
    g, u, x = torch.randn(64, 96), torch.randn(64, 96), torch.randn(5, 64)
    w = swiglu_interleave(g, u)
    torch.testing.assert_close(swiglu_tiles(x @ w), F.silu(x @ g) * (x @ u))
    assert torch.equal(w[:, :32], g[:, :32]) and torch.equal(w[:, 32:64], u[:, :32])  # tile 0 gate, 1 up
    g2, u2 = swiglu_deinterleave(w)
    assert torch.equal(g2, g) and torch.equal(u2, u)
    with pytest.raises(ValueError, match="multiple"):
        swiglu_interleave(torch.randn(4, 40), torch.randn(4, 40))


def test_grouped_unfold_equals_the_grouped_conv() -> None:
    torch.manual_seed(2)
    d, s = 64, 40
    w, b, x = torch.randn(d, d // 16, 31), torch.randn(d), torch.randn(2, s, d)
    want = F.conv1d(x.transpose(1, 2), w, b, padding=15, groups=16).transpose(1, 2)
    torch.testing.assert_close(conv_unfolded(x, conv_group_unfold(w), b), want, rtol=1e-5, atol=1e-4)
    assert torch.equal(conv_group_fold(conv_group_unfold(w)), w)


def test_vae_layouts_are_conv2d_of_height_one(tiny_vae: Path) -> None:
    vae = load_vae(tiny_vae)
    sd = vae.state_dict()
    dev = convert_vae(sd)
    back = unconvert_vae_convs(dev)
    dec = {k: v for k, v in sd.items() if k.startswith("decoder.") and k.endswith((".weight", ".bias"))}
    assert set(back) == set(dec) and all(torch.equal(back[k], dec[k]) for k in dec)
    torch.manual_seed(0)
    x = torch.randn(1, 8, 20)
    w, b = torch.randn(6, 8, 7), torch.randn(6)
    torch.testing.assert_close(F.conv2d(x[:, :, None], w.unsqueeze(2), b, padding=(0, 9), dilation=(1, 3))[:, :, 0],
                               F.conv1d(x, w, b, padding=9, dilation=3))
    for s in (2, 4, 8):  # ConvTranspose1d(k=2s, stride s, pad ceil(s/2)) via conv_transpose2d
        wt = torch.randn(8, 6, 2 * s)
        p = math.ceil(s / 2)
        y2 = F.conv_transpose2d(x[:, :, None], wt.unsqueeze(2), b, stride=(1, s), padding=(0, p))[:, :, 0]
        torch.testing.assert_close(y2, F.conv_transpose1d(x, wt, b, stride=s, padding=p))
        assert y2.shape[-1] == 20 * s
    name = "decoder.layers.1.layers.0"
    torch.testing.assert_close(dev[f"{name}.alpha_exp"].reshape(-1), sd[f"{name}.alpha"].exp())
    torch.testing.assert_close(dev[f"{name}.inv_beta"].reshape(-1), 1 / (sd[f"{name}.beta"].exp() + 1e-9))


def test_cache_misses_then_hits_and_is_keyed_by_ttnn_version_and_dtype(tmp_path: Path) -> None:
    dit = random_dit(4, dim=128, depth=1)
    calls = []

    def convert():
        calls.append(1)
        return convert_dit(dit.state_dict(), dit.config)

    cache = WeightCache(tmp_path)
    w1, hit1 = cache.load_or_convert("dit", "model-a", "0.81.1", "bfloat16", convert, keep_fp32=("in.wc",))
    w2, hit2 = cache.load_or_convert("dit", "model-a", "0.81.1", "bfloat16", convert, keep_fp32=("in.wc",))
    assert (hit1, hit2, len(calls)) == (False, True, 1)
    assert w1.keys() == w2.keys() and all(torch.equal(w1[k], w2[k]) for k in w1)
    assert w2["layers.0.wqkv"].dtype == torch.bfloat16
    assert w2["layers.0.ln1"].dtype == torch.float32 and w2["in.wc"].dtype == torch.float32  # rows stay fp32
    full = convert_dit(dit.state_dict(), dit.config)
    assert torch.equal(w2["layers.0.wqkv"], full["layers.0.wqkv"].to(torch.bfloat16))
    _, hit3 = cache.load_or_convert("dit", "model-a", "0.82.0", "bfloat16", convert)
    _, hit4 = cache.load_or_convert("dit", "model-a", "0.81.1", "float32", convert)
    _, hit5 = cache.load_or_convert("dit", "model-b", "0.81.1", "bfloat16", convert)
    assert (hit3, hit4, hit5) == (False, False, False) and len(calls) == 4
    assert len(list(tmp_path.glob("*.safetensors"))) == 4
    assert cache_key("dit", "m", "0.81.1", "bfloat8_b") != cache_key("dit", "m", "0.81.1", "bfloat16")
    assert not list(tmp_path.glob("*.tmp"))  # atomic writes leave nothing behind
