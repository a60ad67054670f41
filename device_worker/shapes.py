"""Shapes both processes agree on: rates, model lengths, DiT sequence buckets, VAE decode windows.

No torch, numpy or ttnn imports: the engine, the worker and the ttnn backend all read this file.
"""

from __future__ import annotations

from dataclasses import dataclass

SAMPLE_RATE = 44_100  # Hz, stereo
CHANNELS = 2
HOP = 2048  # audio samples per latent frame (VAE down/up-sampling ratio)
FRAME_RATE = SAMPLE_RATE / HOP  # 21.533203125 latent frames per second
LATENT_DIM = 64  # channels of the latent the DiT works on
ENCODER_DIM = 128  # the VAE encoder emits mean (64) || scale (64)

BASE_FRAMES = 2048  # DiffRhythm 1.2 base: always 2048 frames (95.1 s)
FULL_FRAMES = 6144  # DiffRhythm 1.2 full: up to 6144 frames (285.3 s)
BASE_SECONDS = 95
FULL_MIN_SECONDS, FULL_MAX_SECONDS = 96, 285

# Upstream's chunked decode: 128-frame windows, 32-frame overlap, hard splice in the overlap's middle.
DECODE_WINDOW = 128
DECODE_OVERLAP = 32

# The ttnn backend pads the DiT sequence to a multiple of this (16 buckets for 96-285 s songs).
SEQ_BUCKET = 256


def max_frames_for(duration_s: float) -> int:
    """The model's frame budget for a song length in seconds (95 -> base, 96-285 -> full), as upstream."""
    if duration_s == BASE_SECONDS:
        return BASE_FRAMES
    if FULL_MIN_SECONDS <= duration_s <= FULL_MAX_SECONDS:
        return FULL_FRAMES
    raise ValueError(
        f"duration {duration_s!r} s is not supported: use 95 (base model) or 96-285 (full model)"
    )


def end_frame_for(duration_s: float) -> int:
    """Number of latent frames generated for a song of `duration_s` seconds (upstream `get_lrc_token`)."""
    max_frames = max_frames_for(duration_s)
    if max_frames == BASE_FRAMES:
        return BASE_FRAMES
    return min(int(duration_s * SAMPLE_RATE / HOP), FULL_FRAMES)


def seconds_to_frame(t: float) -> int:
    """Upstream's frame index of a time in seconds: `int(t * 44100 / 2048)`."""
    return int(t * SAMPLE_RATE / HOP)


def seq_bucket(frames: int, bucket: int = SEQ_BUCKET) -> int:
    """Round a frame count up to the next multiple of `bucket` (the ttnn backend's fixed shapes)."""
    if frames <= 0:
        raise ValueError(f"frames must be positive, got {frames!r}")
    return -(-frames // bucket) * bucket


@dataclass(frozen=True)
class Window:
    """One VAE decode window: latent frames [start, start + length) are decoded; of its audio,
    frames [keep_start, keep_end) (absolute latent-frame positions) are kept in the song."""

    start: int
    length: int
    keep_start: int
    keep_end: int


def plan_windows(frames: int, window: int = DECODE_WINDOW, overlap: int = DECODE_OVERLAP) -> list[Window]:
    """Upstream's chunked-decode plan, generalised to any window >= overlap.

    Windows start every `window - overlap` frames; if the last regular window does not end at `frames`,
    one more window holding the last `window` frames is placed at the end. Each window drops
    `overlap // 2` frames at every edge it shares with a neighbour, and later windows overwrite earlier
    ones, so the song switches windows in the middle of each overlap (hard splice, no crossfade).
    The kept ranges are disjoint, in order, and cover [0, frames).
    """
    if frames <= 0:
        raise ValueError(f"frames must be positive, got {frames!r}")
    if overlap < 0 or overlap % 2 or window <= overlap:
        raise ValueError(f"need an even overlap smaller than the window, got window={window} overlap={overlap}")
    if frames <= window:
        return [Window(0, frames, 0, frames)]
    hop = window - overlap
    starts = list(range(0, frames - window + 1, hop))
    if starts[-1] + window < frames:
        starts.append(frames - window)
    half = overlap // 2
    plan: list[Window] = []
    for k, start in enumerate(starts):
        keep_start = 0 if k == 0 else start + half
        keep_end = frames if k == len(starts) - 1 else start + window - half
        plan.append(Window(start, window, keep_start, keep_end))
    # Later windows overwrite earlier ones: clip each kept range at the next window's kept start.
    out: list[Window] = []
    for k, w in enumerate(plan):
        keep_end = min(w.keep_end, plan[k + 1].keep_start) if k + 1 < len(plan) else w.keep_end
        out.append(Window(w.start, w.length, w.keep_start, keep_end))
    return out
