"""The model core and the worker on Apple's MPS: float16 "mixed" against float32, the VAE in float16, and a
song through a real worker process with `--device mps` (what `--device auto` picks on a Mac without CUDA).

Marked `mps`; skipped (saying so) where torch sees no Apple GPU, as on the CI machines and the GPU machine.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from reference_cases import FP32_CASES, load_case, song_kwargs

from device_worker.backends.torch_backend import TorchBackend, vae_dtype
from device_worker.config import resolve_precision
from device_worker.model import sampling
from device_worker.model.load import load_dit
from device_worker.model.vae import load_vae

pytestmark = [
    pytest.mark.mps,
    pytest.mark.skipif(not torch.backends.mps.is_available(), reason="no Apple GPU (MPS) visible to torch here"),
]


def pcc(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double().flatten().cpu(), b.double().flatten().cpu()
    return float(torch.corrcoef(torch.stack((a, b)))[0, 1])


@pytest.mark.parametrize("name", FP32_CASES)
def test_auto_precision_on_mps_tracks_the_cpus_float32(reference_dir: Path, name: str) -> None:
    meta, t = load_case(reference_dir, name)
    precision = resolve_precision("torch", "mps", "auto")
    ref = sampling.sample(load_dit(reference_dir / meta["checkpoint"]), **song_kwargs(meta, t)).float()
    dit = load_dit(reference_dir / meta["checkpoint"], device="mps", dtype=getattr(torch, precision))
    got = sampling.sample(dit, **song_kwargs(meta, t)).float().cpu()
    assert pcc(got, ref) >= 0.995


def test_half_vae_on_mps_tracks_float32(tiny_vae: Path) -> None:
    latent = torch.randn(1, 64, 256, generator=torch.Generator().manual_seed(2))
    ref = torch.cat(list(load_vae(tiny_vae).decode_windows(latent, 128, 32)), dim=2)
    vae = load_vae(tiny_vae, device="mps", dtype=vae_dtype("mps", "float16"))
    half = torch.cat(list(vae.decode_windows(latent, 256, 32)), dim=2).float().cpu()
    assert pcc(half, ref) >= 0.995


def test_a_song_through_a_worker_on_mps(reference_dir: Path, tmp_path: Path) -> None:
    from engine.worker_client import Worker, collect

    assert TorchBackend("mps").decode_window_frames == 256
    with Worker(dit=str(reference_dir / "dit-tiny-base"), vae=str(reference_dir / "vae-tiny" / "vae_model.pt"),
                device="mps", lock_dir=str(tmp_path / "locks")) as w:
        ready = w.wait_ready(300)
        assert ready.info["compile"] == "off" and w.welcome.precision == "float16"
        rng = np.random.default_rng(0)
        res = collect(w.submit(rng.integers(1, 300, 64), rng.standard_normal(512, dtype=np.float32),
                               rng.standard_normal(512, dtype=np.float32), steps=4, seed=1), 300)
    assert res.audio.shape == (2, 64 * 2048) and np.isfinite(res.audio).all()
