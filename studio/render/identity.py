"""A job's identity: everything its audio depends on, hashed, so `--resume` skips only what is still right.

The identity holds the request's content (lyrics text even when they came from a file; the bytes of
style audio, embeddings and edited songs, by hash, so a re-recorded reference with the same name counts
as a change and a moved file does not), the effective settings (steps, cfg, seed, variations, formats,
the test model's crop, the workers' backends and precisions) and the model files' ids. A job without a
seed keeps `seed: null` in its identity: its random seed is drawn per render, so a finished one is kept.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from studio.render.jobs import RenderJob

IDENTITY_VERSION = 1  # bump when what goes into an identity changes (every job renders again once)


@dataclass(frozen=True)
class RunSettings:
    """What the whole run adds to every job's identity."""

    models: dict[str, str]  # engine.config.Models.ids()
    workers: tuple[str, ...]  # sorted "backend/precision" of the workers (they change the samples)
    crop_frames: int | None = None  # test model only

    def to_dict(self) -> dict[str, Any]:
        return {"models": dict(self.models), "workers": list(self.workers), "crop_frames": self.crop_frames}


def file_digest(path: str | Path, _cache: dict[str, str] = {}) -> str:  # noqa: B006 - per-process memo
    """sha256 of a file's bytes (memoised per path, size and mtime: a batch names one style many times)."""
    p = Path(path)
    st = p.stat()
    key = f"{p.resolve()}:{st.st_size}:{st.st_mtime_ns}"
    if key not in _cache:
        h = hashlib.sha256()
        with p.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _cache[key] = h.hexdigest()
    return _cache[key]


def identity(job: RenderJob, settings: RunSettings) -> dict[str, Any]:
    req = job.request
    style: dict[str, Any]
    if req.style.text is not None:
        style = {"text": req.style.text}
    else:
        kind = req.style.kind
        style = {kind + "_sha256": file_digest(getattr(req.style, kind))}
    edit = None
    if req.edit is not None:
        edit = {"song_sha256": file_digest(req.edit.song), "segments": [list(s) for s in req.edit.segments],
                "mode": req.edit.mode}
    return {
        "identity_version": IDENTITY_VERSION,
        "request": {"lyrics": req.lyrics, "style": style, "duration": float(req.duration), "edit": edit,
                    "title": req.title},
        "effective": {"steps": req.steps, "cfg": float(req.cfg), "seed": req.seed, "variations": req.variations,
                      "formats": list(req.output_formats()), "workers": list(settings.workers),
                      "crop_frames": settings.crop_frames},
        "models": dict(settings.models),
    }


def identity_hash(ident: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(ident, sort_keys=True, ensure_ascii=True).encode()).hexdigest()
