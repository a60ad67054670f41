"""Reference songs for editing and continuation (DiffRhythm 1.2 `--edit --ref-song`).

The song is read (any format libsndfile reads), resampled to 44.1 kHz stereo, peak-normalised to
-6 dBFS as upstream, and handed to the VAE encoder (the worker's, or the in-process one in tests) for a
latent drawn from mean and scale. Unlike upstream, a reference shorter than the song is zero-padded
(upstream crashes there) and a longer one is cropped. Edit segments in seconds become frames exactly as
upstream: s = -1 -> 0, e = -1 -> max_frames, otherwise int(t * 44100 / 2048).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from device_worker.audio import resample
from device_worker.shapes import HOP, LATENT_DIM, SAMPLE_RATE, end_frame_for, max_frames_for, seconds_to_frame

from .audio_files import probe, read_span, to_stereo

PEAK_DB = -6.0  # upstream normalize_audio(y, -6)

# encode(audio [1, 2, n] float32 at 44.1 kHz, seed) -> latent [1, 64, T] (already drawn from mean/scale)
Encoder = Callable[[np.ndarray, int], np.ndarray]


class ReferenceError(ValueError):
    """A reference song or edit request cannot be used; the message says why."""


def load_reference_audio(path: str | Path) -> np.ndarray:
    """[2, n] float32 at 44.1 kHz, peak at -6 dBFS over both channels."""
    info = probe(path)
    data, rate = read_span(info.path)
    stereo = resample(to_stereo(data), rate, SAMPLE_RATE)  # [n, 2]
    peak = float(np.abs(stereo).max())
    if peak == 0.0:
        raise ReferenceError(f"reference song {info.path.name} is silent")
    return np.ascontiguousarray((stereo * (10 ** (PEAK_DB / 20) / peak)).T, dtype=np.float32)


def fit_latent(latent: np.ndarray, frames: int) -> tuple[np.ndarray, str | None]:
    """[T, 64] -> [frames, 64]: crop, or pad with zeros (what the model sees as 'no reference')."""
    if latent.ndim != 2 or latent.shape[1] != LATENT_DIM:
        raise ReferenceError(f"reference latent must be [T, {LATENT_DIM}], got {latent.shape}")
    t = latent.shape[0]
    if t >= frames:
        return latent[:frames], (f"reference is longer than the song; its last {t - frames} frames are dropped"
                                 if t > frames else None)
    out = np.zeros((frames, LATENT_DIM), dtype=np.float32)
    out[:t] = latent
    return out, f"reference covers {t} of {frames} frames; the rest is padded with zeros"


def segments_to_frames(segments: Sequence[Sequence[float]], max_frames: int) -> list[tuple[int, int]]:
    """Upstream `get_reference_latent`: [[s, e], ...] seconds -> [(sf, ef), ...] frames (end-exclusive)."""
    out = []
    for seg in segments:
        if len(seg) != 2:
            raise ReferenceError(f"an edit segment is [start, end] in seconds, got {list(seg)!r}")
        s, e = float(seg[0]), float(seg[1])
        for v in (s, e):
            if v < 0 and v != -1:
                raise ReferenceError(f"edit segment times must be >= 0 seconds or -1, got {list(seg)!r}")
        sf = 0 if s == -1 else seconds_to_frame(s)
        ef = max_frames if e == -1 else seconds_to_frame(e)
        if ef <= sf:
            raise ReferenceError(f"edit segment {list(seg)!r} is empty ({sf} -> {ef} frames)")
        out.append((sf, ef))
    return out


def continuation_segments(reference_s: float) -> list[list[float]]:
    """Continue a song: keep the reference, generate from its end to the end of the song."""
    return [[reference_s, -1]]


@dataclass
class EditPlan:
    cond: np.ndarray  # [end_frame, 64] reference latent (padded / cropped)
    segments: list[tuple[int, int]]  # frames to regenerate
    reference_s: float
    notes: list[str] = field(default_factory=list)


def plan_edit(
    path: str | Path, *, duration_s: float, segments: Sequence[Sequence[float]] | None,
    encode: Encoder, seed: int = 0,
) -> EditPlan:
    """Reference latent + frame segments for a song of `duration_s` (95, or 96-285 s). `segments=None`
    continues the song after the reference (which must then be shorter than the song)."""
    return plan_edit_frames(path, frames=end_frame_for(duration_s), max_frames=max_frames_for(duration_s),
                            segments=segments, encode=encode, seed=seed)


def plan_edit_frames(
    path: str | Path, *, frames: int, max_frames: int, segments: Sequence[Sequence[float]] | None,
    encode: Encoder, seed: int = 0,
) -> EditPlan:
    """`plan_edit` for an explicit song length in frames (`frames` generated, `max_frames` the model's)."""
    audio = load_reference_audio(path)
    reference_s = audio.shape[1] / SAMPLE_RATE
    notes: list[str] = []
    if segments is None:
        song_s = frames * HOP / SAMPLE_RATE
        if reference_s >= song_s:
            raise ReferenceError(
                f"continuation needs a reference shorter than the song ({reference_s:.1f} s >= {song_s:.1f} s)"
            )
        segments = continuation_segments(reference_s)
    frame_segments = segments_to_frames(segments, max_frames)
    latent = np.asarray(encode(audio[None], seed))
    expected_t = -(-audio.shape[1] // HOP)
    if latent.ndim != 3 or latent.shape[:2] != (1, LATENT_DIM) or abs(latent.shape[2] - expected_t) > 1:
        raise ReferenceError(f"VAE returned {latent.shape}, expected [1, {LATENT_DIM}, ~{expected_t}]")
    cond, note = fit_latent(np.ascontiguousarray(latent[0].T, dtype=np.float32), frames)
    if note:
        notes.append(note)
    return EditPlan(cond, frame_segments, reference_s, notes)
