"""Reading user audio (style references, reference songs): any format libsndfile reads, any rate and
channel count, with clear errors. Only the requested span is read, so a 20-minute file costs its window.

No torch: resampling is scipy's polyphase filter (`resample_poly`, Kaiser window), which plays the role
of librosa's / torchaudio's resamplers upstream (not bit-identical to them; see docs/models.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np
import soundfile as sf

SUPPORTED = "WAV, FLAC, OGG (Vorbis/Opus) or MP3"


class AudioFileError(ValueError):
    """A user's audio file cannot be used; the message says which file and why."""


@dataclass(frozen=True)
class AudioInfo:
    path: Path
    rate: int
    channels: int
    frames: int
    format: str

    @property
    def duration_s(self) -> float:
        return self.frames / self.rate


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def probe(path: str | Path) -> AudioInfo:
    """Rate, channels, length and container of an audio file. The container is detected from the
    content, so a FLAC named `.wav` still reads; a file that is not audio raises AudioFileError."""
    path = Path(path)
    if not path.is_file():
        raise AudioFileError(f"audio file {path} does not exist")
    try:
        info = sf.info(str(path))
    except (sf.LibsndfileError, RuntimeError, TypeError) as exc:
        raise AudioFileError(
            f"cannot read {path.name} as audio (expected {SUPPORTED}; the file may be corrupt "
            f"or in another format): {_first_line(exc)}"
        ) from None
    if info.frames <= 0 or info.samplerate <= 0:
        raise AudioFileError(f"{path.name} holds no audio samples")
    return AudioInfo(path, int(info.samplerate), int(info.channels), int(info.frames), str(info.format))


def read_span(path: str | Path, start_s: float = 0.0, duration_s: float | None = None) -> tuple[np.ndarray, int]:
    """Read `duration_s` seconds from `start_s` (librosa's rounding: round(rate * t)) as float32
    [n, channels] at the file's own rate. Reads only that span."""
    info = probe(path)
    start = max(0, int(round(info.rate * start_s)))
    frames = -1 if duration_s is None else max(0, int(round(info.rate * duration_s)))
    try:
        with sf.SoundFile(str(info.path)) as f:
            if start:
                f.seek(min(start, info.frames))
            data = f.read(frames, dtype="float32", always_2d=True)
    except (sf.LibsndfileError, RuntimeError) as exc:
        raise AudioFileError(f"cannot decode {info.path.name} (corrupt or truncated?): {_first_line(exc)}") from None
    if data.shape[0] == 0:
        raise AudioFileError(f"{info.path.name}: no audio in the span {start_s:.2f} s + {duration_s} s")
    if not np.isfinite(data).all():
        raise AudioFileError(f"{info.path.name} decodes to non-finite samples (corrupt file?)")
    return data, info.rate


def to_mono(x: np.ndarray) -> np.ndarray:
    """[n, ch] -> [n]: the channel mean (librosa's to_mono)."""
    return x.mean(axis=1, dtype=np.float32) if x.ndim == 2 else x.astype(np.float32)


def to_stereo(x: np.ndarray) -> np.ndarray:
    """[n, ch] -> [n, 2]: mono duplicated, more than two channels truncated (upstream prepare_audio)."""
    if x.ndim == 1:
        x = x[:, None]
    if x.shape[1] == 1:
        return np.repeat(x, 2, axis=1)
    return x[:, :2]


def resample(x: np.ndarray, src: int, dst: int) -> np.ndarray:
    """Resample along axis 0. Output length ceil(n * dst / src), as librosa."""
    if src == dst:
        return x.astype(np.float32, copy=False)
    from scipy.signal import resample_poly  # lazy: only reference audio needs scipy

    ratio = Fraction(dst, src)
    y = resample_poly(x, ratio.numerator, ratio.denominator, axis=0)
    n_out = math.ceil(x.shape[0] * dst / src)
    return np.ascontiguousarray(y[:n_out], dtype=np.float32)
