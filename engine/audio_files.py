"""Reading user audio (style references, reference songs): any format libsndfile reads, any rate and
channel count, with clear errors. Only the requested span is read, so a 20-minute file costs its window.

Reading follows what upstream's style path gets from `librosa.load(path, sr=24000, offset, duration)`
(librosa 0.10, DiffRhythm's pin): a soundfile read of int(duration * rate) frames from frame
int(offset * rate), the channel mean, then `soxr` at quality "soxr_hq" (librosa's default resampler),
padded or cut to librosa's length int(ceil(n * (dst / src))). No torch, no librosa: soxr + numpy.
"""

from __future__ import annotations

from dataclasses import dataclass
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
    """Read `duration_s` seconds from `start_s` as float32 [n, channels] at the file's own rate, with
    librosa's frame rule: start at int(start_s * rate), read int(duration_s * rate) frames (fewer where
    the file ends first). Reads only that span."""
    info = probe(path)
    start = max(0, int(start_s * info.rate))
    frames = -1 if duration_s is None else max(0, int(duration_s * info.rate))
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
    """[n, ch] -> [n] float32: the channel mean, computed as librosa's to_mono does on the
    [ch, n] view of the same read (np.mean over the channel axis); one channel is returned as is."""
    if x.ndim == 1:
        return x.astype(np.float32, copy=False)
    if x.shape[1] == 1:
        return np.ascontiguousarray(x[:, 0], dtype=np.float32)
    return np.ascontiguousarray(np.mean(x.astype(np.float32, copy=False).T, axis=0), dtype=np.float32)


def to_stereo(x: np.ndarray) -> np.ndarray:
    """[n, ch] -> [n, 2]: mono duplicated, more than two channels truncated (upstream prepare_audio)."""
    if x.ndim == 1:
        x = x[:, None]
    if x.shape[1] == 1:
        return np.repeat(x, 2, axis=1)
    return x[:, :2]


