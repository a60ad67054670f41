"""The one-song form: `studio render --lyrics song.lrc --style "..." --duration 180 -o song.wav`.

It is a one-line batch rendered into a hidden folder beside the output; on success the audio is moved to
the named file and the take's record beside it (`song.json`, its `files` naming the moved file), then the
hidden folder goes. The audio format follows the output's suffix.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from engine.request import FORMATS
from studio.render.outdir import RENDER_RECORD, read_json, write_json

AUDIO_SUFFIXES = (".wav", ".flac", ".mp3", ".ogg", ".m4a", ".aac")


def style_value(style: str) -> Any:
    """A reference recording or a saved .npy embedding when `style` names an existing such file; else
    the text prompt (so a prompt that happens to be a file name needs the file to exist to change)."""
    p = Path(style).expanduser()
    if p.is_file():
        if p.suffix.lower() == ".npy":
            return {"embedding": str(p.resolve())}
        if p.suffix.lower() in AUDIO_SUFFIXES:
            return {"audio": str(p.resolve())}
    return style


def output_format(out: Path) -> str:
    fmt = out.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise ValueError(f"-o {out}: the file name must end in one of {', '.join('.' + f for f in FORMATS)}")
    return fmt


def job_line(out: Path, lyrics: str, style: str, duration: float, **optional: Any) -> str:
    """The one JSON line of the one-song batch."""
    job: dict[str, Any] = {"id": "song", "lyrics": lyrics, "style": style_value(style), "duration": duration,
                           "formats": [output_format(out)]}
    job.update({k: v for k, v in optional.items() if v is not None})
    return json.dumps(job)


def deliver(outdir: Path, out: Path) -> dict[str, str]:
    """Move the rendered song to `out` and its record to `out` with `.json`; returns the final paths."""
    folder = outdir / "song"
    rec = read_json(folder / RENDER_RECORD)
    if rec is None or not rec.get("takes"):
        raise RuntimeError(f"the render left no complete song in {folder}")
    picked = (rec.get("pick") or {}).get("take")  # best_of: the variation that sang its lyrics best
    take = next((t for t in rec["takes"] if t["take"] == picked), rec["takes"][0])
    fmt = output_format(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    record_path = out.with_suffix(".json")
    os.replace(folder / take["files"][fmt], out)
    record = read_json(folder / take["files"]["json"]) or {}
    record["files"] = {fmt: out.name}
    write_json(record_path, record)
    shutil.rmtree(outdir, ignore_errors=True)
    return {fmt: str(out), "json": str(record_path)}


def relink_takes(data_dir: Path, take_ids: list[str], files: dict[str, str], db_url: str | None = None) -> None:
    """`--session`: point the store's take at the delivered files (it was recorded in the hidden folder)."""
    from studio.store import Store

    store = Store(data_dir, db_url=db_url)
    try:
        record = read_json(Path(files["json"])) or {}
        for take_id in take_ids:
            store.update_take(take_id, files=files, record=record)
    finally:
        store.close()
