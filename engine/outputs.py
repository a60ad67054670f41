"""Finished takes on disk: audio files with tags, and a JSON record of everything that made them.

Every take gets its own folder, created with an atomic `mkdir` under a name holding the time, title,
seed and a random token, so two takes can never write over each other (two engines on one data dir
included). Files are written under a temporary name and renamed into place, the record last: a take
whose `record.json` exists is complete; anything else is debris of a crash or cancel. The audio itself
is encoded in a child process (`engine.encoder`), so a crashing encoder costs one take only.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from device_worker import shapes
from device_worker.audio import to_int16
from engine.encoder import encode

logger = logging.getLogger(__name__)

RECORD_VERSION = 1


@dataclass
class TakeRecord:
    """What the record says about one take (besides the audio)."""

    job_id: str
    take: int
    seed: int
    request: dict[str, Any]
    models: dict[str, Any] = field(default_factory=dict)
    worker: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    lyrics_report: list[Any] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    effective: dict[str, Any] = field(default_factory=dict)  # frames, song_duration, segments in frames
    style_match: dict[str, Any] = field(default_factory=dict)  # engine.style_match (or why it is absent)

    @property
    def title(self) -> str:
        return str(self.request.get("title") or "")


def slug(text: str, limit: int = 40) -> str:
    s = re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()[:limit].strip("-")
    return s or "song"


MADE_WORDS = {"edit": "edit", "continue": "extension"}  # a request's edit mode, in a musician's word


def made_word(request: dict[str, Any]) -> str:
    """"edit" or "extension" for a take made from another one (its request has an `edit`), else ""."""
    edit = request.get("edit") or {}
    return MADE_WORDS.get(str(edit.get("mode") or "edit"), "edit") if edit else ""


def file_stem(info: TakeRecord) -> str:
    """The take's file name without extension (as `studio render` writes it): title, what made it (an
    edit or an extension of another take is named so), variation, seed and the time it was written, so
    the edits and extensions of one take never share a name. The studio's downloads are named apart
    (`studio.download_names`)."""
    made = made_word(info.request)
    return f"{slug(info.title)}{'-' + made if made else ''}-t{info.take}-s{info.seed}-{time.strftime('%H%M%S')}"


def new_take_dir(root: Path, title: str, seed: int, take: int) -> Path:
    """A fresh folder under `root/YYYY-MM-DD/`; `mkdir` fails on an existing name, so retry with a new
    token rather than ever sharing a folder."""
    day = root / time.strftime("%Y-%m-%d")
    day.mkdir(parents=True, exist_ok=True)
    for _ in range(100):
        name = f"{time.strftime('%H%M%S')}-{slug(title)}-t{take}-s{seed}-{secrets.token_hex(4)}"
        try:
            path = day / name
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise RuntimeError(f"could not create a unique take folder under {day}")


def write_take(folder: Path, audio: Any, info: TakeRecord, formats: tuple[str, ...],
               pcm_fix: Callable[[np.ndarray], np.ndarray] | None = None) -> dict[str, str]:
    """Write the take's audio in `formats` (WAV always), tag it, then its record. Returns format -> path.

    `audio` is the decoded float32 [2, n] song; the int16 post-processing is upstream's. `pcm_fix`
    changes the int16 samples before they are written (engine.splice).
    """
    t0 = time.perf_counter()
    pcm = to_int16(audio)  # [n, 2] int16, peak-normalised over both channels as upstream
    if pcm_fix is not None:
        pcm = pcm_fix(pcm)
    stem = file_stem(info)
    files: dict[str, str] = {}
    try:
        files.update(encode(folder, stem, pcm, formats, _tags(info)))
        info.timings["write"] = round(time.perf_counter() - t0, 6)
        record = folder / f"{stem}.json"
        _atomic_write_text(record, json.dumps(make_record(info, files, pcm), indent=2, sort_keys=True))
        files["json"] = str(record)
    except BaseException:
        remove_take_files(folder, files)
        raise
    return files


def make_record(info: TakeRecord, files: dict[str, str], pcm: np.ndarray) -> dict[str, Any]:
    return {
        "record_version": RECORD_VERSION,
        "job_id": info.job_id,
        "take": info.take,
        "seed": info.seed,
        "title": info.title,
        "request": info.request,
        "effective": info.effective,
        "models": info.models,
        "worker": info.worker,
        "timings_s": info.timings,
        "style_match": info.style_match,
        "lyrics_report": info.lyrics_report,
        "notes": info.notes,
        "audio": {
            "sample_rate": shapes.SAMPLE_RATE,
            "channels": shapes.CHANNELS,
            "frames": int(pcm.shape[0]),
            "seconds": round(pcm.shape[0] / shapes.SAMPLE_RATE, 3),
            "postprocess": "upstream: peak-normalise over both channels, clamp, x32767, int16",
        },
        "files": {fmt: os.path.basename(p) for fmt, p in files.items()},
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "software": dict(_versions()),
    }


def remove_take_files(folder: Path, files: dict[str, str] | None = None) -> None:
    """Remove what a failed or cancelled write left behind (finished files and temporaries)."""
    for path in list((files or {}).values()) + [str(p) for p in folder.glob("*.partial")]:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    try:
        folder.rmdir()  # only if empty: a folder the caller shares keeps its other files
    except OSError:
        pass


def _tags(info: TakeRecord) -> dict[str, str]:
    style = info.request.get("style") or {}
    style_text = style.get("text") or (
        f"audio: {os.path.basename(style['audio'])}" if style.get("audio")
        else f"embedding: {os.path.basename(style.get('embedding') or '')}")
    return {
        "title": info.title or f"take {info.take}",
        "lyrics": str(info.request.get("lyrics") or ""),
        "style": style_text,
        "seed": str(info.seed),
        "software": "DiffRhythm Studio",
    }


def _atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".partial")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


@functools.cache  # versions cannot change while the process runs; each lookup re-reads metadata files
def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("diffrhythm-studio", "numpy", "soundfile", "mutagen"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "unknown"
    return out
