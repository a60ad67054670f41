"""Fixed shapes for the card: DiT sequence buckets and VAE decode windows (pure Python, no torch or ttnn).

Every distinct shape is a separate compiled program on the card (tens of seconds cold, see
docs/ttnn.md), so a song's frame count is rounded up to a bucket of `SEQ_BUCKET` (256) frames and the
padding is neutralised (`reference.py` shows how). 96-285 s songs (2067-6136 frames) need 16 buckets,
2304 ... 6144; the 95 s base model always runs 2048 frames, one bucket.
"""

from __future__ import annotations

from dataclasses import dataclass

from device_worker.shapes import (
    BASE_FRAMES,
    DECODE_WINDOW,
    FULL_MAX_SECONDS,
    FULL_MIN_SECONDS,
    SEQ_BUCKET,
    end_frame_for,
    seq_bucket,
)


@dataclass(frozen=True)
class Geometry:
    """One song's DiT shape: `frames` real rows inside a padded sequence of `seq` rows."""

    frames: int
    seq: int

    @classmethod
    def for_frames(cls, frames: int, bucket: int = SEQ_BUCKET) -> Geometry:
        return cls(frames, seq_bucket(frames, bucket))

    @property
    def padded(self) -> int:
        return self.seq - self.frames

    @property
    def windows(self) -> list[int]:
        """SDPA `cu_window_seqlens`: keys of the real rows form one window, the padding its own."""
        return [0, self.frames, self.seq] if self.frames < self.seq else [0, self.seq]


def song_buckets(min_s: int = FULL_MIN_SECONDS, max_s: int = FULL_MAX_SECONDS,
                 bucket: int = SEQ_BUCKET) -> list[int]:
    """Every sequence bucket a song of min_s..max_s whole seconds can land in (16 for 96-285 s)."""
    if min_s > max_s:
        raise ValueError(f"min_s {min_s!r} > max_s {max_s!r}")
    return sorted({seq_bucket(end_frame_for(s), bucket) for s in range(min_s, max_s + 1)})


def base_buckets(bucket: int = SEQ_BUCKET) -> list[int]:
    """The base model's one bucket (2048 frames, already a multiple of 256)."""
    return [seq_bucket(BASE_FRAMES, bucket)]


@dataclass(frozen=True)
class WarmShape:
    """One compiled shape: `kind` "dit" (sequence `length`, `batch` guidance rows) or "vae" (window)."""

    kind: str
    length: int
    batch: int = 1

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.length}x{self.batch}"


def warm_plan(min_s: int = FULL_MIN_SECONDS, max_s: int = FULL_MAX_SECONDS, *, batch: int = 2,
              windows: tuple[int, ...] = (DECODE_WINDOW,), bucket: int = SEQ_BUCKET) -> list[WarmShape]:
    """What `studio warm-cache` compiles: VAE windows first (they are built in a fixed device state, see
    `tt_vae.py`), then every DiT bucket with both guidance branches (batch 2) for songs of min_s..max_s."""
    plan = [WarmShape("vae", w) for w in windows]
    plan += [WarmShape("dit", s, batch) for s in song_buckets(min_s, max_s, bucket)]
    return plan

