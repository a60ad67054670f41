"""Output post-processing of decoded songs, as upstream `infer/infer.py` does it, and the resampling and
take window that the style-match figure hears (the worker embeds a finished take's central 10 s itself,
so a take costs no extra device call).

Upstream: `y.div(max|y|).clamp(-1, 1).mul(32767).to(int16)` on the float32 `[2, n]` decode, peak taken
over both channels, then `torchaudio.save(..., 44100)`. The float32 arithmetic here is the same IEEE
operations in the same order, and `astype(int16)` truncates toward zero like torch's cast, so the
samples are identical. numpy only: torch tensors are accepted without importing torch here.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from device_worker.shapes import SAMPLE_RATE

STYLE_RATE = 24_000  # MuQ-MuLan's input rate
STYLE_WINDOW_S = 10.0  # upstream hears the central 10 s of a reference; a take is heard the same way


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


def resampled_length(n: int, src: int, dst: int) -> int:
    """librosa's output length: int(ceil(n * (dst / src))), with the ratio taken first in floating
    point, as librosa does (so 441000 frames at 44.1 kHz give 240001 samples at 24 kHz, not 240000)."""
    return int(math.ceil(n * (float(dst) / src)))


def resample(x: np.ndarray, src: int, dst: int) -> np.ndarray:
    """Resample float32 audio along axis 0 ([n] or [n, ch]) with soxr at "soxr_hq" (librosa's default),
    then zero-pad or cut to `resampled_length` (librosa's fix_length). Same rate: returned as is."""
    x = np.asarray(x, dtype=np.float32)
    if src == dst:
        return x
    if src <= 0 or dst <= 0:
        raise ValueError(f"sample rates must be positive, got {src} -> {dst}")
    import soxr  # lazy: only user audio and the style figure need it

    n_out = resampled_length(x.shape[0], src, dst)
    if x.ndim == 1:
        y = soxr.resample(x, src, dst, quality="soxr_hq")
    else:  # librosa resamples each channel on its own
        y = np.stack([soxr.resample(np.ascontiguousarray(x[:, c]), src, dst, quality="soxr_hq")
                      for c in range(x.shape[1])], axis=1)
    if y.shape[0] >= n_out:
        y = y[:n_out]
    else:
        y = np.concatenate([y, np.zeros((n_out - y.shape[0],) + y.shape[1:], dtype=y.dtype)])
    return np.ascontiguousarray(y, dtype=np.float32)


def style_window(samples: int) -> tuple[int, int, float, float]:
    """(start, stop, start s, length s): the part of a `samples`-long take at 44.1 kHz that the style
    figure hears: its central 10 s (from a whole second, as the style path cuts a reference), or all of
    it when shorter."""
    total_s = samples / SAMPLE_RATE
    length_s = min(STYLE_WINDOW_S, total_s)
    start_s = max(0.0, float(total_s // 2 - length_s / 2)) if total_s > STYLE_WINDOW_S else 0.0
    start = int(start_s * SAMPLE_RATE)
    return start, start + int(length_s * SAMPLE_RATE), start_s, length_s


def style_clip(audio: np.ndarray) -> np.ndarray:
    """The style window of float32 audio [2, n] (already cut to it) -> 24 kHz mono [m], as MuQ-MuLan hears."""
    return resample(np.asarray(audio, np.float32).mean(axis=0), SAMPLE_RATE, STYLE_RATE)


def take_window(audio: np.ndarray) -> tuple[np.ndarray, float, float]:
    """(24 kHz mono samples, start s, length s) of a take's audio float32 [2, n] at 44.1 kHz."""
    a, b, start_s, length_s = style_window(audio.shape[1])
    return style_clip(audio[:, a:b]), start_s, length_s


class StyleWindowTap:
    """Keeps, as a song's decoded blocks go by, only the samples of its style window: the worker hears
    the finished take without holding the whole song (a 285 s take is 100 MB of float32)."""

    def __init__(self, samples: int) -> None:
        self.start, self.stop, self.start_s, self.length_s = style_window(samples)
        self.buffer: np.ndarray | None = np.zeros((2, self.stop - self.start), np.float32)

    def add(self, at: int, block: np.ndarray) -> None:
        """A decoded block [2, n] that starts at sample `at` of the song."""
        a, b = max(at, self.start), min(at + block.shape[1], self.stop)
        if a < b and self.buffer is not None:
            self.buffer[:, a - self.start : b - self.start] = block[:, a - at : b - at]

    def clip(self) -> tuple[np.ndarray, float, float]:
        """(24 kHz mono [m], start s, length s): what the style model hears."""
        if self.buffer is None:
            raise RuntimeError("the style window was released")
        return style_clip(self.buffer), self.start_s, self.length_s

    def release(self) -> None:
        self.buffer = None
