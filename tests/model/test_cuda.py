"""The model core on an NVIDIA GPU: the reference cases in exact fp32, mixed precision against fp32,
the compiled step against eager, and the same seed giving the same bytes twice.

Marked `cuda`; skipped (saying so) where torch sees no CUDA GPU, as on the CI machines. On a GPU machine:
`bench/gpu_check.sh` runs these and `bench/gpu_song.py` in one go.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from reference_cases import FP32_CASES, load_case, max_err, song_kwargs

from device_worker.model import sampling
from device_worker.model.compiled import CompiledDiT
from device_worker.model.load import load_dit
from device_worker.model.vae import load_vae

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU visible to torch here"),
]
DEV = "cuda:0"


@pytest.fixture(autouse=True)
def exact_fp32():
    # The reference path: no TF32 in matmuls or convolutions (the worker sets the same for float32).
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def pcc(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double().flatten().cpu(), b.double().flatten().cpu()
    return float(torch.corrcoef(torch.stack((a, b)))[0, 1])


def _song(dit, **kw) -> torch.Tensor:
    return sampling.sample(dit, **kw).float().cpu()


def _kw(n: int = 96, seed: int = 5) -> dict:
    g = torch.Generator().manual_seed(seed)
    return dict(text=torch.randint(0, 364, (1, n), generator=g), style=torch.randn(1, 512, generator=g),
                negative_style=torch.randn(1, 512, generator=g), duration=n, steps=16, seed=seed)


@pytest.mark.parametrize("name", FP32_CASES)
def test_reference_cases_in_exact_fp32(reference_dir: Path, name: str) -> None:
    meta, t = load_case(reference_dir, name)
    dit = load_dit(reference_dir / meta["checkpoint"], device=DEV)
    final = _song(dit, **song_kwargs(meta, t))
    assert max_err(final, t["final"]) <= 2e-5 * t["final"].abs().max().item()  # the CPU's tolerance


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_mixed_precision_tracks_fp32(tiny_dit_full: Path, dtype) -> None:
    ref = _song(load_dit(tiny_dit_full, device=DEV), **_kw())
    half = _song(load_dit(tiny_dit_full, device=DEV, dtype=dtype, half_mode="mixed"), **_kw())
    assert pcc(half, ref) >= 0.995


def test_half_vae_tracks_fp32(tiny_vae: Path) -> None:
    latent = torch.randn(1, 64, 256, generator=torch.Generator().manual_seed(2))
    ref = torch.cat(list(load_vae(tiny_vae, device=DEV).decode_windows(latent, 128, 32)), dim=2)
    half = torch.cat(list(load_vae(tiny_vae, device=DEV, dtype=torch.float16).decode_windows(latent, 128, 32)), dim=2)
    assert pcc(half.float(), ref) >= 0.995


def test_compiled_equals_eager(tiny_dit_full: Path) -> None:
    dit = load_dit(tiny_dit_full, device=DEV, dtype=torch.bfloat16, half_mode="mixed")
    eager = _song(dit, **_kw())
    compiled = _song(CompiledDiT(dit), **_kw())
    assert pcc(compiled, eager) >= 0.9999 and max_err(compiled, eager) <= 2e-2 * eager.abs().max().item()


def test_same_seed_same_bytes_twice(tiny_dit_full: Path) -> None:
    dit = load_dit(tiny_dit_full, device=DEV, dtype=torch.bfloat16, half_mode="mixed")
    assert torch.equal(_song(dit, **_kw(seed=11)), _song(dit, **_kw(seed=11)))
