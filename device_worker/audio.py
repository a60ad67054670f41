"""Output post-processing of decoded songs, as upstream `infer/infer.py` does it.

Upstream: `y.div(max|y|).clamp(-1, 1).mul(32767).to(int16)` on the float32 `[2, n]` decode, peak taken
over both channels, then `torchaudio.save(..., 44100)`. The float32 arithmetic here is the same IEEE
operations in the same order, and `astype(int16)` truncates toward zero like torch's cast, so the
samples are identical. numpy only: torch tensors are accepted without importing torch here.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _as_float32(audio: Any) -> np.ndarray:
    """[2, n] (or [1, 2, n]) numpy array or torch tensor -> float32 numpy [2, n]."""
    if hasattr(audio, "detach"):  # a torch tensor; .float() first because numpy has no bfloat16
        audio = audio.detach().float().cpu().numpy()
    x = np.asarray(audio, dtype=np.float32)
    if x.ndim == 3 and x.shape[0] == 1:
        x = x[0]  # a batch of one, as the decoder returns it
    if x.ndim != 2 or x.shape[0] != 2:
        raise ValueError(f"expected stereo audio [2, n], got shape {x.shape!r}")
    return x


def peak_normalise(audio: Any) -> np.ndarray:
    """[2, n] -> float32 [2, n] divided by the peak over both channels and clamped to [-1, 1].

    Silence (peak 0) stays silence; upstream would divide by zero and write NaN -> garbage int16."""
    x = _as_float32(audio)
    peak = np.float32(np.max(np.abs(x))) if x.size else np.float32(0)
    if not np.isfinite(peak):
        raise ValueError("audio holds NaN or inf; the decode went wrong (try float32 precision)")
    if peak == 0:
        return np.zeros_like(x)
    return np.clip(x / peak, np.float32(-1), np.float32(1))


def to_int16(audio: Any) -> np.ndarray:
    """Upstream's WAV samples: [2, n] float -> int16 [n, 2] (frames first, as soundfile writes them)."""
    y = peak_normalise(audio) * np.float32(32767)  # float32 [2, n]
    return np.ascontiguousarray(y.astype(np.int16).T)
