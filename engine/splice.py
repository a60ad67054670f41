"""Keep a source take's own samples outside the regenerated ranges (the re-sing edit, issue 30).

An ordinary edit keeps the source's *latent* outside its segments (upstream's edit), so the decode
of the kept parts differs slightly from the source's audio (the VAE's encode is drawn, its decode is
not exact). A re-sing promises "the rest unchanged": here the written PCM outside the frame ranges is
the source file's samples exactly, and the new audio comes in over a short crossfade just inside each
range's edges (so no click at the seams). Both sides are upstream-normalised int16 songs, so their
levels match.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from device_worker.shapes import HOP

FADE = 1024  # samples (23 ms) of crossfade inside each edge of a range


def splice_pcm(new: np.ndarray, source: np.ndarray, frames: Sequence[Sequence[int]], fade: int = FADE) -> np.ndarray:
    """int16 [n, 2] `new` with `source` ([m, 2]) outside the frame ranges (end-exclusive latent frames)."""
    out = new.copy()
    n = min(len(new), len(source))
    keep = np.ones(n, dtype=bool)
    for a, b in frames:
        keep[max(0, int(a) * HOP):min(n, int(b) * HOP)] = False
    out[:n][keep] = source[:n][keep]
    for a, b in frames:
        lo, hi = max(0, int(a) * HOP), min(n, int(b) * HOP)
        width = min(fade, (hi - lo) // 2)
        if width <= 0:
            continue
        ramp = (np.arange(1, width + 1, dtype=np.float32) / (width + 1))[:, None]  # 0 -> 1: source -> new
        for start, w, beside in ((lo, ramp, lo > 0), (hi - width, ramp[::-1], hi < n)):
            if not beside:
                continue  # no kept source sample on that side to fade from
            seg = slice(start, start + width)
            mixed = source[seg].astype(np.float32) * (1 - w) + new[seg].astype(np.float32) * w
            out[seg] = np.clip(np.round(mixed), -32768, 32767).astype(np.int16)
    return out


def read_pcm(path: str | Path) -> np.ndarray:
    """A take's WAV as int16 [n, 2]."""
    import soundfile as sf

    data, _ = sf.read(str(path), dtype="int16", always_2d=True)
    return data if data.shape[1] == 2 else np.repeat(data[:, :1], 2, axis=1)
