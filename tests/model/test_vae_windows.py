"""Windowed decode, encode of short/odd audio, draw_latent, and checkpoint mapping of the Oobleck VAE."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from device_worker.model.vae import CheckpointError, OobleckVAE, draw_latent, load_vae, vae_from_state_dict
from device_worker.shapes import plan_windows

safetensors_torch = pytest.importorskip("safetensors.torch")
HOP = 2048


@pytest.fixture(scope="module")
def vae(tiny_vae: Path) -> OobleckVAE:
    return load_vae(tiny_vae)


@pytest.fixture(scope="module")
def tiny_sd(tiny_vae: Path) -> dict[str, torch.Tensor]:
    return dict(torch.jit.load(str(tiny_vae), map_location="cpu").state_dict())


def upstream_chunked(
    run, x: torch.Tensor, chunk: int, overlap: int, up: int, down: int, out_ch: int
) -> torch.Tensor:
    """Upstream `decode_audio`/`encode_audio` (chunked=True) as written in DiffRhythm's infer_utils:
    output position = input position * up // down; chunk/overlap in input steps. Kept independent of
    plan_windows."""
    total = x.shape[2]
    hop = chunk - overlap
    chunks, i = [], 0
    for i in range(0, total - chunk + 1, hop):
        chunks.append(x[:, :, i : i + chunk])
    if i + chunk != total:
        chunks.append(x[:, :, -chunk:])
    y = torch.zeros(x.shape[0], out_ch, total * up // down)
    ol = (overlap // 2) * up // down
    for k, c in enumerate(chunks):
        yc = run(c)
        if k == len(chunks) - 1:
            t_end = y.shape[2]
            t_start = t_end - yc.shape[2]
        else:
            t_start = k * hop * up // down
            t_end = t_start + chunk * up // down
        c_start, c_end = 0, yc.shape[2]
        if k > 0:
            t_start, c_start = t_start + ol, c_start + ol
        if k < len(chunks) - 1:
            t_end, c_end = t_end - ol, c_end - ol
        y[:, :, t_start:t_end] = yc[:, :, c_start:c_end]
    return y


def _latent(frames: int, seed: int = 0, batch: int = 1) -> torch.Tensor:
    return torch.randn(batch, 64, frames, generator=torch.Generator().manual_seed(seed))


class _Tagged(OobleckVAE):
    """Decoder stand-in whose samples say which window and frame produced them, so a wrong splice
    shows up as a large error (a real decoder's windows agree to ~1e-6 and hide it)."""

    def _decode(self, latent: torch.Tensor) -> torch.Tensor:  # [B, 64, t] -> [B, 2, t * hop]
        tag = latent[:, :2, :] * 1000 + torch.arange(latent.shape[2]) * 0.001
        return tag.repeat_interleave(HOP, dim=2)


@pytest.mark.parametrize("frames", [1, 5, 127, 128, 129, 224, 300, 320, 611])
def test_windows_equal_upstream_splices(frames: int, vae: OobleckVAE) -> None:
    tagged = _Tagged.__new__(_Tagged)
    tagged.__dict__.update(vae.__dict__)
    latent = torch.arange(frames, dtype=torch.float32).expand(1, 64, frames).contiguous()
    want = upstream_chunked(tagged._decode, latent, 128, 32, HOP, 1, 2)
    got = torch.cat(list(tagged.decode_windows(latent, 128, 32)), dim=-1)
    assert got.shape == want.shape == (1, 2, frames * HOP)
    assert torch.equal(got, want)


@pytest.mark.parametrize("frames", [300])
def test_windows_equal_upstream_chunked_decode(frames: int, vae: OobleckVAE) -> None:
    latent = _latent(frames, seed=frames)
    want = upstream_chunked(vae.decode, latent, 128, 32, HOP, 1, 2)
    got = torch.cat(list(vae.decode_windows(latent)), dim=-1)
    assert (got - want).abs().max().item() <= 1e-6


@pytest.fixture(scope="module")
def song(vae: OobleckVAE) -> tuple[torch.Tensor, torch.Tensor]:
    latent = _latent(300, seed=1)
    return latent, vae.decode(latent)


@pytest.mark.parametrize(("window", "overlap"), [(256, 64), (96, 32), (160, 40)])
def test_other_windows_equal_whole_decode(window: int, overlap: int, vae: OobleckVAE, song) -> None:
    latent, whole = song
    blocks = list(vae.decode_windows(latent, window=window, overlap=overlap))
    assert len(blocks) == len(plan_windows(300, window, overlap)) > 1
    assert (torch.cat(blocks, dim=-1) - whole).abs().max().item() <= 1e-4


def test_blocks_stream_before_the_song_is_decoded(vae: OobleckVAE) -> None:
    calls = []
    handle = vae.decoder.register_forward_hook(lambda mod, inp, out: calls.append(inp[0].shape[2]))
    try:
        gen = vae.decode_windows(_latent(300), window=128, overlap=32)
        first = next(gen)
        assert calls == [128]  # only the first window has been decoded
        assert first.shape == (1, 2, (128 - 16) * HOP)
        rest = list(gen)
    finally:
        handle.remove()
    assert calls == [128, 128, 128] and len(rest) == 2


def test_half_precision_returns_float32_close_to_reference(tiny_vae: Path, vae: OobleckVAE) -> None:
    half = load_vae(tiny_vae, dtype=torch.bfloat16)
    assert half.dtype == torch.bfloat16
    latent = _latent(8, seed=6)
    want = vae.decode(latent)
    got = half.decode(latent)
    assert got.dtype == torch.float32 and got.shape == want.shape
    assert (got - want).abs().max().item() <= 0.1 * want.abs().max().item()  # measured ~6% of peak


def test_decode_rejects_channels_last_and_bad_windows(vae: OobleckVAE) -> None:
    with pytest.raises(ValueError, match="channels-last"):
        vae.decode(torch.zeros(1, 10, 64))
    with pytest.raises(ValueError, match="channels-last"):
        vae.decode_windows(torch.zeros(1, 10, 64))  # before the first next()
    with pytest.raises(ValueError, match="overlap"):
        vae.decode_windows(torch.zeros(1, 64, 10), window=32, overlap=32)


@pytest.mark.parametrize("n", [5000, 3 * HOP, 1])
def test_encode_short_and_odd_lengths(n: int, vae: OobleckVAE, tiny_vae: Path) -> None:
    ts = torch.jit.load(str(tiny_vae), map_location="cpu")
    audio = 0.4 * torch.randn(1, 2, n, generator=torch.Generator().manual_seed(n))
    frames = -(-n // HOP)
    padded = torch.nn.functional.pad(audio, (0, frames * HOP - n))
    with torch.no_grad():
        want = ts.encode_export(padded)
    got = vae.encode(audio)
    assert got.shape == (1, 128, frames)
    assert (got - want).abs().max().item() <= 1e-4


def test_encode_long_audio_in_windows_like_upstream(vae: OobleckVAE, tiny_vae: Path) -> None:
    ts = torch.jit.load(str(tiny_vae), map_location="cpu")
    audio = 0.4 * torch.randn(1, 2, 250 * HOP, generator=torch.Generator().manual_seed(9))
    with torch.no_grad():
        want = upstream_chunked(ts.encode_export, audio, 128 * HOP, 32 * HOP, 1, HOP, 128)
    got = vae.encode(audio)
    assert got.shape == (1, 128, 250)
    assert (got - want).abs().max().item() <= 1e-5
    assert (got - vae.encode(audio, window=None)).abs().max().item() <= 1e-4


def test_draw_latent() -> None:
    gen = torch.Generator().manual_seed(3)
    mean, scale = torch.randn(2, 64, 50, generator=gen), torch.randn(2, 64, 50, generator=gen)
    enc = torch.cat([mean, scale], dim=1)
    a, b, c = draw_latent(enc, 7), draw_latent(enc, 7), draw_latent(enc, 8)
    assert a.shape == (2, 64, 50) and a.dtype == torch.float32
    assert torch.equal(a, b) and not torch.allclose(a, c)
    eps = (a - mean) / (torch.nn.functional.softplus(scale) + 1e-4)
    assert abs(eps.mean().item()) < 0.05 and abs(eps.std().item() - 1) < 0.05
    tight = draw_latent(torch.cat([mean, torch.full_like(scale, -30.0)], dim=1), 7)
    assert (tight - mean).abs().max().item() < 1e-3  # std = softplus(-30) + 1e-4 ~ 1e-4


# --- checkpoint layouts ------------------------------------------------------------------------------


def _to_weight_norm(sd: dict[str, torch.Tensor], style: str) -> dict[str, torch.Tensor]:
    """Unfold every conv weight into (g, v) with v != W, so only a correct fold gives W back."""
    out = {}
    gen = torch.Generator().manual_seed(11)
    for key, w in sd.items():
        if not key.endswith(".weight"):
            out[key] = w
            continue
        stem = key[: -len(".weight")]
        g = torch.linalg.vector_norm(w, dim=(1, 2), keepdim=True)  # [C0, 1, 1]
        v = w * (0.5 + torch.rand(w.shape[0], 1, 1, generator=gen))  # per-row scale: same direction
        names = (
            ("weight_g", "weight_v")
            if style == "g/v"
            else ("parametrizations.weight.original0", "parametrizations.weight.original1")
        )
        out[f"{stem}.{names[0]}"], out[f"{stem}.{names[1]}"] = g, v
    return out


_RU = ["snake1", "conv1", "snake2", "conv2"]
_EB = ["res_unit1", "res_unit2", "res_unit3", "snake1", "conv1"]
_DB = ["snake1", "conv_t1", "res_unit1", "res_unit2", "res_unit3"]


def _to_diffusers(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """stable-audio-tools names -> diffusers AutoencoderOobleck names, snake params as [1, C, 1]."""
    out = {}
    for key, value in sd.items():
        side, _, idx, *rest = key.split(".")
        i = int(idx)
        if i == 0:
            name = f"{side}.conv1.{'.'.join(rest)}"
        elif i == 6:
            name = f"{side}.snake1.{'.'.join(rest)}"
        elif i == 7:
            name = f"{side}.conv2.{'.'.join(rest)}"
        else:
            part = (_EB if side == "encoder" else _DB)[int(rest[1])]
            tail = rest[2:] if not part.startswith("res_unit") else [_RU[int(rest[3])], *rest[4:]]
            name = f"{side}.block.{i - 1}.{part}.{'.'.join(tail)}"
        if name.endswith((".alpha", ".beta")):
            value = value[None, :, None]
        out[name] = value
    return out


def _save(tmp_path: Path, sd: dict[str, torch.Tensor]) -> Path:
    path = tmp_path / "vae.safetensors"
    safetensors_torch.save_file({k: v.contiguous() for k, v in sd.items()}, str(path))
    return path


@pytest.mark.parametrize("layout", ["g/v", "parametrizations", "diffusers", "prefixed fp16"])
def test_other_checkpoint_layouts_decode_the_same(layout: str, tiny_sd, vae, tmp_path: Path) -> None:
    if layout == "diffusers":
        sd = _to_diffusers(_to_weight_norm(tiny_sd, "g/v"))
    elif layout == "prefixed fp16":
        sd = {f"autoencoder.{k}": v.half() for k, v in tiny_sd.items()}
    else:
        sd = _to_weight_norm(tiny_sd, layout)
    if layout != "prefixed fp16":
        assert not any(k.endswith(".weight") for k in sd)  # every conv weight really is unfolded
    other = load_vae(_save(tmp_path, sd))
    latent = _latent(12, seed=4)
    tol = 2e-2 if layout == "prefixed fp16" else 1e-5
    assert (other.decode(latent) - vae.decode(latent)).abs().max().item() <= tol
    audio = 0.3 * torch.randn(1, 2, 6 * HOP, generator=torch.Generator().manual_seed(2))
    assert (other.encode(audio) - vae.encode(audio)).abs().max().item() <= tol * 10


def test_missing_leftover_and_misshaped_keys_are_named(tiny_sd) -> None:
    sd = dict(tiny_sd)
    del sd["decoder.layers.3.layers.2.layers.1.bias"]
    sd["decoder.layers.3.extra.weight"] = torch.zeros(3)
    sd["encoder.layers.2.layers.0.layers.0.alpha"] = torch.zeros(5)
    with pytest.raises(CheckpointError) as err:
        vae_from_state_dict(sd)
    msg = str(err.value)
    assert "decoder.layers.3.layers.2.layers.1.bias" in msg
    assert "decoder.layers.3.extra.weight" in msg
    assert "encoder.layers.2.layers.0.layers.0.alpha: checkpoint (5,) vs model (4,)" in msg


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda sd: sd.update({"bottleneck.scale": torch.zeros(1)}), "bottleneck.scale"),
        (lambda sd: sd.update({"decoder.layers.0.weight_g": torch.ones(64, 1, 1)}), "only ['g']"),
        (lambda sd: sd.pop("decoder.layers.7.weight"), "decoder.layers.7.weight"),
        (lambda sd: [sd.pop(k) for k in list(sd) if k.startswith("decoder.")], "decoder"),
    ],
)
def test_bad_state_dicts_say_what_is_wrong(edit, needle: str, tiny_sd) -> None:
    sd = dict(tiny_sd)
    edit(sd)
    with pytest.raises(CheckpointError, match=None) as err:
        vae_from_state_dict(sd)
    assert needle in str(err.value)


def test_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="does not exist"):
        load_vae(tmp_path / "nope.pt")
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a model")
    with pytest.raises(CheckpointError, match="cannot read"):
        load_vae(junk)


@pytest.mark.parametrize("layout", ["g/v", "diffusers"])
def test_release_sized_layouts_map_on_meta(layout: str) -> None:
    """The believed release architecture (channels 128), in weight-norm form, maps onto the model that
    infer_config derives from it; counts are the spec's (decoder 78,122,626 params / 182 keys with g/v)."""
    from device_worker.model.vae_checkpoint import (
        OobleckConfig,
        canonical_state_dict,
        check_against,
        infer_config,
    )

    with torch.device("meta"):
        model = OobleckVAE(OobleckConfig())
    plain = model.state_dict()
    sd = _to_weight_norm_meta(plain)
    dec = {k: v for k, v in sd.items() if k.startswith("decoder.")}
    assert len(dec) == 182 and sum(v.numel() for v in dec.values()) == 78_122_626
    if layout == "diffusers":
        sd = _to_diffusers(sd)
    canon = canonical_state_dict(sd)
    assert infer_config(canon) == OobleckConfig()
    check_against(plain, canon)


def _to_weight_norm_meta(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out = {}
    for key, w in sd.items():
        if key.endswith(".weight"):
            stem = key[: -len(".weight")]
            out[f"{stem}.weight_g"] = torch.empty(w.shape[0], 1, 1, device="meta")
            out[f"{stem}.weight_v"] = torch.empty_like(w)
        else:
            out[key] = w
    return out
