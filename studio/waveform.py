"""The take's waveform as data for the page's region editor (assets/ui/regions.js).

The server reads the WAV once and sends ~600 min/max pairs and the duration as data attributes of one
HTML block; the browser draws them on a canvas and lets the musician drag regions on it. Peaks are
cached next to the other derived files, so reopening a take does not re-read its audio.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import numpy as np
import soundfile as sf

PAIRS = 600  # enough for a page-wide canvas; each pair is one column's min and max


def peaks(audio_path: str | Path, pairs: int = PAIRS) -> tuple[list[list[float]], float] | None:
    """([[min, max], ...] scaled to the loudest sample, duration s) of a WAV, or None if unreadable.

    Read one column at a time: a 285 s song is ~100 MB as float32, which the studio process need not hold
    (it stays under 500 MB without model weights)."""
    try:
        with sf.SoundFile(str(audio_path)) as f:
            frames, rate = f.frames, f.samplerate
            duration = frames / float(rate) if rate else 0.0
            if frames == 0:
                return [], duration
            n = min(pairs, frames)
            edges = np.linspace(0, frames, n + 1).astype(np.int64)  # even columns, the last ends at the end
            lo, hi = np.empty(n), np.empty(n)
            for i in range(n):
                mono = f.read(int(edges[i + 1] - edges[i]), dtype="float32", always_2d=True).mean(axis=1)
                lo[i], hi[i] = mono.min(), mono.max()
    except Exception:  # a missing or unreadable file just has no waveform
        return None
    loud = float(max(-lo.min(), hi.max())) or 1.0
    return [[round(float(a) / loud, 3), round(float(b) / loud, 3)] for a, b in zip(lo, hi, strict=True)], duration


def cached_peaks(audio_path: str | Path, cache: Path) -> tuple[list[list[float]], float] | None:
    """`peaks`, kept in `cache` (JSON) after the first read."""
    try:
        d = json.loads(cache.read_text())
        return d["peaks"], float(d["duration"])
    except Exception:  # absent or damaged: read the audio again
        pass
    got = peaks(audio_path)
    if got is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps({"peaks": got[0], "duration": got[1]}))
    return got


KEYS = "arrows move 1 s (Shift: 10 s), Space plays or pauses, [ and ] mark a region's start and end"
OWNER_HINT = ("Drag on the waveform (or use [ and ] while it has focus) to mark a region to regenerate; "
              "click a region to hear it looped.")
GUEST_HINT = ("Drag over a part, then click it to hear it looped; with the waveform focused, the arrows move "
              "and Space plays.")


def regions_html(take_id: str, audio_path: str | Path, cache: Path, caption: str = "", editable: bool = True) -> str:
    """The region editor's block: peaks and duration as data; regions.js draws and drives it. `caption`
    (plain text, e.g. the take's style-match figure) is shown above the waveform. Not `editable` (a shared,
    read-only view): regions still loop on the player, but nothing offers to regenerate or continue them."""
    got = cached_peaks(audio_path, cache)
    if got is None:
        return ""
    pk, duration = got
    return (f"<div class='wave-regions' data-take='{html.escape(take_id)}' data-duration='{duration:.3f}' "
            f"data-peaks='{html.escape(json.dumps(pk, separators=(',', ':')))}'>"
            + (f"<div class='wr-caption'>{html.escape(caption)}</div>" if caption else "")
            # Focusable, named and driven by keys too (assets/ui/regions.js): arrows move the playhead,
            # Space plays, [ and ] mark a region's start and end.
            + f"<canvas class='wr-canvas' height='120' tabindex='0' role='slider' aria-valuemin='0' "
            f"aria-valuemax='{duration:.1f}' aria-valuenow='0' aria-label='Waveform of the take: {html.escape(KEYS)}'></canvas>"
            "<div class='wr-list'></div>"
            "<div class='wr-actions'>"
            + ("<button type='button' class='wr-repaint'>Regenerate these regions</button>"
               "<button type='button' class='wr-extend'>Continue from the region's start</button>" if editable else "")
            + f"<span class='wr-hint'>{OWNER_HINT if editable else GUEST_HINT}</span>"
            "</div></div>")


__all__ = ["peaks", "cached_peaks", "regions_html"]
