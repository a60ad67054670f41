"""`--session NAME`: the batch's takes recorded in the studio's store, so they show in its history.

Only the store's public API (`studio.store.Store`) is used. The session is the machine owner's session
(`studio.identity`: the command line's token) titled NAME, created on first use and reused by later runs. Each variation of a job
is one take row, added before the job is submitted (its seed fixed first, as the studio does), then
kept in step with the job's events (progress writes throttled) and finished with the files at their
final place (after the job's folder is committed) and the engine's full record.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from studio.progress import PROGRESS_WRITE_S, progress_of, store_finished
from studio.store import CANCELLED, DONE, FAILED, RUNNING, Store

logger = logging.getLogger(__name__)



class SessionRecorder:
    def __init__(self, store: Store, name: str, owner: str) -> None:
        self.store = store
        # Takes a killed render left "running" are marked interrupted (only those of dead processes).
        store.recover_interrupted()
        match = [s for s in store.list_sessions(owner, limit=10_000) if s.title == name]
        self.session = match[0] if match else store.create_session(name, owner=owner,
                                                                   inputs={"source": "studio render"})
        self._takes: dict[str, list[str]] = {}  # job id -> take ids (one per variation)
        self._last: dict[str, float] = {}

    @property
    def session_id(self) -> str:
        return self.session.id

    def submitted(self, job_id: str, request: Any) -> list[str]:
        """One queued take per variation; `request` has its seed fixed."""
        payload = {**request.to_dict(), "render_id": job_id}
        ids = [self.store.add_take(self.session.id, payload, variation=i, seed=seed).id
               for i, seed in enumerate(request.seeds())]
        self._takes[job_id] = ids
        return ids

    def event(self, job_id: str, e: Any) -> None:
        from engine import events as ev

        ids = self._takes.get(job_id)
        if not ids:
            return
        if isinstance(e, ev.Running):
            self.store.update_take(ids[e.take], status=RUNNING, phase=f"starting on {e.worker}", seed=e.seed)
        elif (moved := progress_of(e)) is not None:
            now = time.monotonic()
            if now - self._last.get(ids[e.take], 0.0) < PROGRESS_WRITE_S:
                return
            self._last[ids[e.take]] = now
            self.store.update_take(ids[e.take], status=RUNNING, progress=moved[0], phase=moved[1])

    def done(self, job_id: str, takes: list[dict[str, Any]], folder: Path) -> None:
        """`takes`: [{take, seed, files: {fmt: name}, timings}] as in render.json, files in `folder`."""
        ids = self._takes.get(job_id, [])
        for t in takes:
            if t["take"] >= len(ids):
                continue
            files = {fmt: str(folder / name) for fmt, name in t["files"].items()}
            store_finished(self.store, ids[t["take"]], t["seed"], files, t.get("timings") or {})

    def ended(self, job_id: str, status: str, error: str | None = None) -> None:
        """Failed or cancelled: every take of the job not already done says so."""
        assert status in (FAILED, CANCELLED)
        for take_id in self._takes.get(job_id, []):
            take = self.store.get_take(take_id)
            if take is not None and take.status != DONE:
                self.store.update_take(take_id, status=status, phase=status, error=error)

    def close(self) -> None:
        self.store.close()
