"""Output post-processing: upstream's peak-normalised int16 samples, and the float variant."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from device_worker.audio import peak_normalise, to_int16

torch = pytest.importorskip("torch")



def to_float32(audio: Any) -> np.ndarray:
    """Peak-normalised float32 [n, 2] for lossless float outputs (FLAC, later stages)."""
    return np.ascontiguousarray(peak_normalise(audio).T)


def _song(n: int = 10_000, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((2, n)) * 1.7).astype(np.float32)  # peaks above 1, as decodes do


def _upstream(y: torch.Tensor) -> torch.Tensor:
    """infer/infer.py: output.to(float32).div(max|output|).clamp(-1, 1).mul(32767).to(int16)."""
    return y.to(torch.float32).div(torch.max(torch.abs(y))).clamp(-1, 1).mul(32767).to(torch.int16)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_int16_equals_upstream_sample_for_sample(seed: int) -> None:
    y = _song(seed=seed)
    got = to_int16(y)
    assert got.dtype == np.int16 and got.shape == (y.shape[1], 2)
    assert np.array_equal(got, _upstream(torch.from_numpy(y)).numpy().T)


def test_peak_is_over_both_channels() -> None:
    y = np.zeros((2, 8), dtype=np.float32)
    y[0, 3], y[1, 5] = 0.5, -2.0
    out = to_int16(y)
    assert out[5, 1] == -32767 and out[3, 0] == int(0.25 * 32767)
    assert np.abs(peak_normalise(y)).max() == 1.0


def test_torch_inputs_and_batch_of_one() -> None:
    y = _song(seed=3)
    t = torch.from_numpy(y)
    assert np.array_equal(to_int16(t), to_int16(y))
    assert np.array_equal(to_int16(t[None]), to_int16(y))  # [1, 2, n] as decode returns it
    assert to_int16(t.to(torch.bfloat16)).shape == (y.shape[1], 2)


def test_float_output() -> None:
    y = _song(seed=4)
    f = to_float32(y)
    assert f.dtype == np.float32 and f.shape == (y.shape[1], 2) and f.flags["C_CONTIGUOUS"]
    assert np.abs(f).max() == 1.0
    assert np.allclose(f.T, y / np.abs(y).max(), atol=1e-7)


def test_silence_and_bad_input() -> None:
    assert not to_int16(np.zeros((2, 5), dtype=np.float32)).any()
    with pytest.raises(ValueError, match="NaN"):
        to_int16(np.full((2, 4), np.nan, dtype=np.float32))
    with pytest.raises(ValueError, match=r"\[2, n\]"):
        to_int16(np.zeros((4, 2), dtype=np.float32))


def test_importing_audio_does_not_import_torch() -> None:
    import subprocess
    import sys

    code = "import sys, device_worker.audio; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
