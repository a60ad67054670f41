"""The output folder: `OUTDIR/<id>/` per job, committed by rename, and `OUTDIR/manifest.json`.

A job renders into a hidden temporary folder (`OUTDIR/.partial-<id>-<token>/`); only when every take is
written does `render.json` (the job's identity and files) go in and the folder is renamed to `<id>`.
So `OUTDIR/<id>/render.json` means complete, whatever killed an earlier run; a cancelled job leaves no
folder behind, and hidden debris of a killed run is removed by the next one. A failed job's folder holds
only `failure.json`. Every file here is written to a temporary name and renamed (atomic on one
filesystem), the manifest included, so a reader never sees half a JSON document.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import shutil
import time
from pathlib import Path
from typing import Any

RENDER_RECORD = "render.json"
FAILURE_RECORD = "failure.json"
MANIFEST = "manifest.json"
LOCK = ".render.lock"
PARTIAL_PREFIX = ".partial-"
OLD_PREFIX = ".old-"


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str), encoding="utf-8")
    os.replace(tmp, path)


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


class OutDirBusy(RuntimeError):
    """Another `studio render` is writing this folder."""


class OutDir:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock: Any = None

    def prepare(self) -> list[str]:
        """Create and lock the folder (one run at a time: a second one would take the first one's
        temporaries for debris); remove hidden debris that killed runs left. Returns what was removed."""
        self.root.mkdir(parents=True, exist_ok=True)
        fh = open(self.root / LOCK, "a+")  # noqa: SIM115 - held for the run; the kernel drops it at exit
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.seek(0)
            holder = fh.read().strip() or "?"
            fh.close()
            raise OutDirBusy(f"another studio render (pid {holder}) is writing {self.root}; wait for it, "
                             "or choose another -o") from None
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        self._lock = fh
        removed = []
        for p in self.root.iterdir():
            if p.is_dir() and p.name.startswith((PARTIAL_PREFIX, OLD_PREFIX)):
                shutil.rmtree(p, ignore_errors=True)
                removed.append(p.name)
        return removed

    def release(self) -> None:
        if self._lock is not None:
            # Removed while still held, so a finished batch leaves only its own files behind.
            (self.root / LOCK).unlink(missing_ok=True)
            self._lock.close()
            self._lock = None

    def job_dir(self, job_id: str) -> Path:
        return self.root / job_id

    def new_partial(self, job_id: str) -> Path:
        path = self.root / f"{PARTIAL_PREFIX}{job_id}-{secrets.token_hex(4)}"
        path.mkdir()
        return path

    def commit(self, partial: Path, job_id: str) -> Path:
        """Rename `partial` to `<id>`, replacing an earlier folder of that id (set aside, then removed).

        A crash between the two renames leaves the id missing (rendered again) and a hidden old folder
        (removed by the next run); never a mix of old and new files under the id.
        """
        final = self.job_dir(job_id)
        old = None
        if final.exists():
            old = self.root / f"{OLD_PREFIX}{job_id}-{secrets.token_hex(4)}"
            os.replace(final, old)
        os.replace(partial, final)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return final

    def discard(self, partial: Path | None) -> None:
        if partial is not None:
            shutil.rmtree(partial, ignore_errors=True)

    def completed(self, job_id: str, ident_hash: str) -> dict[str, Any] | None:
        """The job's render record when its folder is complete for this identity (every file present)."""
        folder = self.job_dir(job_id)
        rec = read_json(folder / RENDER_RECORD)
        if rec is None or rec.get("status") != "done" or rec.get("identity_hash") != ident_hash:
            return None
        names = [name for take in rec.get("takes", []) for name in take.get("files", {}).values()]
        if not names or not all((folder / name).is_file() and (folder / name).stat().st_size > 0 for name in names):
            return None
        return rec

    def write_failure(self, job_id: str, failure: dict[str, Any]) -> Path:
        partial = self.new_partial(job_id)
        write_json(partial / FAILURE_RECORD, failure)
        return self.commit(partial, job_id)


class Manifest:
    """`OUTDIR/manifest.json`: the run and every job line's outcome, rewritten as outcomes change.

    Outcomes: done, skipped (--resume: complete and unchanged), failed, cancelled (Ctrl-C), invalid
    (validation), not-started (the run stopped first), queued / running (only in the manifest of a run
    that was killed: nothing finished them).
    """

    def __init__(self, root: Path, header: dict[str, Any]) -> None:
        self.path = root / MANIFEST
        self.header = dict(header)
        self.jobs: dict[int, dict[str, Any]] = {}  # by jobs-file line: ids may repeat on invalid lines

    def set(self, line: int, **entry: Any) -> None:
        self.jobs.setdefault(line, {"line": line}).update(entry)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for e in self.jobs.values():
            out[e["outcome"]] = out.get(e["outcome"], 0) + 1
        return out

    def data(self, status: str) -> dict[str, Any]:
        return {**self.header, "status": status, "updated": now_iso(), "counts": self.counts(),
                "jobs": [self.jobs[k] for k in sorted(self.jobs)]}

    def write(self, status: str) -> dict[str, Any]:
        data = self.data(status)
        write_json(self.path, data)
        return data
