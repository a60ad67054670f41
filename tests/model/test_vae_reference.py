"""Our plain-torch Oobleck VAE against upstream's vectors (`cases/vae_*`, README tolerance 1e-4 abs)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from device_worker.model.vae import OobleckVAE, load_vae

safetensors_torch = pytest.importorskip("safetensors.torch")
TOL = 1e-4


def _case(reference_dir: Path, name: str) -> dict[str, torch.Tensor]:
    return safetensors_torch.load_file(str(reference_dir / "cases" / f"{name}.safetensors"))


@pytest.fixture(scope="module")
def vae(tiny_vae: Path) -> OobleckVAE:
    return load_vae(tiny_vae)


def test_config_read_off_the_tiny_file(vae: OobleckVAE) -> None:
    cfg = vae.config
    assert (cfg.channels, cfg.c_mults, cfg.strides) == (4, (1, 2, 4, 8, 16), (2, 4, 4, 8, 8))
    assert (cfg.encoder_latent_dim, cfg.decoder_latent_dim, cfg.hop) == (128, 64, 2048)
    assert sum(p.numel() for p in vae.parameters()) == 207_216  # README: n_params


def test_decode_full(vae: OobleckVAE, reference_dir: Path) -> None:
    case = _case(reference_dir, "vae_decode_full")
    audio = vae.decode(case["latent"])
    assert audio.shape == case["audio"].shape == (1, 2, 40 * 2048)
    assert (audio - case["audio"]).abs().max().item() <= TOL


def test_decode_chunked_matches_upstream_chunks(vae: OobleckVAE, reference_dir: Path) -> None:
    case = _case(reference_dir, "vae_decode_chunked")
    blocks = list(vae.decode_windows(case["latent"], window=128, overlap=32))
    assert len(blocks) == 3  # README: 3 chunks for T = 300
    audio = torch.cat(blocks, dim=-1)
    assert audio.shape == case["audio_chunked"].shape
    assert (audio - case["audio_chunked"]).abs().max().item() <= TOL
    # The blocks switch exactly at upstream's splice positions.
    ends = torch.tensor([b.shape[-1] for b in blocks]).cumsum(0)[:-1]
    assert ends.tolist() == case["splice_samples"].tolist()


def test_unchunked_decode_around_splices(vae: OobleckVAE, reference_dir: Path) -> None:
    case = _case(reference_dir, "vae_decode_chunked")
    full = vae.decode(case["latent"])
    for k, s in enumerate(case["splice_samples"].tolist()):
        got = full[:, :, s - 4096 : s + 4096]
        assert (got - case["audio_unchunked_windows"][k]).abs().max().item() <= TOL


def test_encode(vae: OobleckVAE, reference_dir: Path) -> None:
    case = _case(reference_dir, "vae_encode")
    latent = vae.encode(case["audio"])
    assert latent.shape == case["latent"].shape == (1, 128, 40)
    assert (latent - case["latent"]).abs().max().item() <= TOL


def test_cross_check_against_torchscript_batch2(vae: OobleckVAE, tiny_vae: Path) -> None:
    """Fresh inputs (batch 2, odd length) through the reference TorchScript module and ours."""
    ts = torch.jit.load(str(tiny_vae), map_location="cpu")
    gen = torch.Generator().manual_seed(5)
    latent = torch.randn(2, 64, 11, generator=gen)
    audio = 0.3 * torch.randn(2, 2, 9 * 2048, generator=gen)
    with torch.no_grad():
        want_audio, want_latent = ts.decode_export(latent), ts.encode_export(audio)
    assert (vae.decode(latent) - want_audio).abs().max().item() <= TOL
    assert (vae.encode(audio) - want_latent).abs().max().item() <= TOL
