"""The compiled DiT step (torch.compile, static shapes) gives the eager step's song, on the CPU here.

Inductor compiles for the CPU as it does for CUDA (C++ instead of Triton kernels), so the compile path
itself is exercised on every run; the CUDA run of the same check is in tests/test_cuda.py.
"""

from __future__ import annotations

import shutil

import pytest
import torch
from _worker_util import Song

from device_worker import sampling
from device_worker.compiled import CompiledDiT, should_compile
from device_worker.models import load_dit


def test_auto_compiles_on_cuda_only():
    assert should_compile("auto", "cuda:0") and not should_compile("auto", "cpu")
    assert should_compile("on", "cpu") and not should_compile("off", "cuda:0")
    with pytest.raises(ValueError, match="compile must be one of auto, on, off"):
        should_compile("yes", "cpu")


@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                    reason="torch.compile on the CPU needs a C++ compiler (apt-get install g++)")
def test_compiled_song_equals_eager(reference_dir):
    torch.set_num_threads(1)
    dit = load_dit(reference_dir / "dit-tiny-base")
    song = Song(frames=64, steps=4, seed=3)
    text, style, neg = (torch.from_numpy(a)[None] for a in song.inputs())

    def run(backbone):
        return sampling.sample(backbone, text=text, style=style, negative_style=neg, duration=song.frames,
                               steps=song.steps, cfg_strength=song.cfg, seed=song.seed)

    eager = run(dit)
    compiled = run(CompiledDiT(dit))
    # Fused kernels reorder float adds: equal to float32 rounding, not bit for bit.
    assert torch.allclose(compiled, eager, rtol=1e-4, atol=1e-5), (compiled - eager).abs().max()
    assert compiled.shape == eager.shape == (1, song.frames, 64)
