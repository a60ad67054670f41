"""The batch loop: valid jobs through the engine in file order, outcomes into folders and the manifest.

A few jobs are kept submitted ahead (`window`, the engine's admission limit by default) so the engine's
host stages prepare the next song and write the last while the card renders the current one; with the
`fifo` policy they still run in file order. One thread per submitted job forwards its events to a queue,
and this loop (the main thread) handles them all: progress, the store, committing folders, the
manifest. Ctrl-C sets `stop`: submitted jobs are cancelled (the unit on the card finishes), each is
reported cancelled, their temporary folders are removed, and jobs not yet submitted are "not-started".
A job whose every take is already made is not cancelled: it only waits for its lyrics check, which
the worker runs once the cancelled jobs leave the card, so a finished song is never thrown away.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from studio.render.jobs import RenderJob
from studio.render.outdir import RENDER_RECORD, Manifest, OutDir, now_iso, write_json
from studio.render.pick import check_summary, pick
from studio.render.progress import Progress

logger = logging.getLogger(__name__)

CANCEL_WAIT_S = 120.0  # a unit in flight finishes before the cancel lands; a long decode takes a while
EXIT_INTERRUPTED = 130


@dataclass
class Pending:
    job: RenderJob
    ident: dict[str, Any]
    ident_hash: str


@dataclass
class Active:
    pending: Pending
    handle: Any  # engine.jobs.EngineJob
    partial: Path
    started: float = field(default_factory=time.monotonic)
    takes: dict[int, Any] = field(default_factory=dict)  # take -> TakeResult
    checks: dict[int, dict[str, Any]] = field(default_factory=dict)  # take -> its lyrics_check
    last_events: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=8))

    def audio_complete(self) -> bool:
        return len(self.takes) >= self.pending.job.request.variations


class BatchRunner:
    def __init__(self, engine: Any, outdir: OutDir, manifest: Manifest, progress: Progress, *,
                 recorder: Any = None, window: int | None = None) -> None:
        self.engine, self.outdir, self.manifest, self.progress = engine, outdir, manifest, progress
        self.recorder = recorder
        self.window = max(1, window or getattr(engine.config, "ready_limit", 2))
        self.stop = threading.Event()
        self._events: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._active: dict[str, Active] = {}
        self._started_ids: list[str] = []
        self._store_warned = False

    # -- the loop ---------------------------------------------------------------------------------
    def run(self, todo: list[Pending]) -> None:
        waiting = deque(todo)
        while (waiting or self._active) and not self.stop.is_set():
            while waiting and len(self._active) < self.window and not self.stop.is_set():
                if not self._submit(waiting[0]):
                    break  # the engine is busy: wait for an event, then try again
                waiting.popleft()
            try:
                job_id, event = self._events.get(timeout=0.2)
            except queue.Empty:
                continue
            self._handle(job_id, event)
        if self.stop.is_set():
            self._cancel_all()
            for p in waiting:
                self.manifest.set(p.job.line, outcome="not-started")
            self.manifest.write("interrupted")

    def _submit(self, p: Pending) -> bool:
        from engine.units import BusyError

        request = p.job.request.with_seed()  # fixed here so the manifest and the store hold it from the start
        partial = self.outdir.new_partial(p.job.id)
        try:
            handle = self.engine.submit(request, out_dir=partial)
        except BusyError:
            self.outdir.discard(partial)
            return False
        except Exception as exc:  # a request the engine refuses after all: this job's failure only
            self.outdir.discard(partial)
            self._fail(p, f"{type(exc).__name__}: {exc}", None, [])
            return True
        act = Active(p, handle, partial)
        self._active[p.job.id] = act
        self.manifest.set(p.job.line, id=p.job.id, outcome="queued", identity_hash=p.ident_hash,
                          seeds=request.seeds(), folder=p.job.id)
        if self.recorder is not None:
            take_ids = self._record("submitted", p.job.id, request)
            if take_ids:
                self.manifest.set(p.job.line, store_take_ids=take_ids)
        self.manifest.write("running")
        threading.Thread(target=self._forward, args=(p.job.id, handle), name=f"render-{p.job.id}",
                         daemon=True).start()
        return True

    def _forward(self, job_id: str, handle: Any) -> None:
        for event in handle:
            self._events.put((job_id, event))

    def _handle(self, job_id: str, e: Any) -> None:
        from engine import events as ev

        act = self._active.get(job_id)
        if act is None:
            return
        if not isinstance(e, ev.AudioChunk):
            act.last_events.append(ev.event_to_dict(e))
        if isinstance(e, ev.Running) and job_id not in self._started_ids:  # on the card now
            self._started_ids.append(job_id)
            act.started = time.monotonic()
            self.progress.start(job_id, act.pending.job.request.variations)
            self.manifest.set(act.pending.job.line, outcome="running", started=now_iso())
            self.manifest.write("running")
        self.progress.event(job_id, e)
        self._record("event", job_id, e)
        if isinstance(e, ev.TakeDone):
            act.takes[e.result.take] = e.result
        elif isinstance(e, ev.LyricsChecked):
            act.checks[e.take] = e.check
        elif isinstance(e, ev.Done):
            self._done(act, e)
        elif isinstance(e, ev.Failed):
            self._active.pop(job_id, None)
            self.outdir.discard(act.partial)
            self._fail(act.pending, e.error, e.take, list(act.last_events))
        elif isinstance(e, ev.Cancelled):
            self._cancelled(act, e.reason)

    def _record(self, method: str, *args: Any) -> Any:
        """A store call that cannot sink the batch: the folders and the manifest are the truth; the
        studio's history is a mirror, so a locked or broken database is a warning (once), not a failure."""
        if self.recorder is None:
            return None
        try:
            return getattr(self.recorder, method)(*args)
        except Exception as exc:  # noqa: BLE001 - any store error
            if not self._store_warned:
                self._store_warned = True
                self.progress.message(f"warning: the studio's store: {type(exc).__name__}: {exc} "
                                      "(rendering continues; the manifest is complete)")
            return None

    # -- outcomes ---------------------------------------------------------------------------------
    def _done(self, act: Active, e: Any) -> None:
        p = act.pending
        results = {t.take: t for t in e.takes} | act.takes
        takes = [{"take": r.take, "seed": r.seed, "files": {k: os.path.basename(v) for k, v in r.files.items()},
                  "timings": r.timings, "worker": r.worker, "lyrics_check": check_summary(act.checks.get(r.take))}
                 for r in sorted(results.values(), key=lambda r: r.take)]
        chosen = {"pick": pick(takes)} if p.job.best_of else {}
        record = {"id": p.job.id, "line": p.job.line, "status": "done", "identity_hash": p.ident_hash,
                  "identity": p.ident, "takes": takes, "timings_s": e.timings, "finished": now_iso(),
                  "request": p.job.raw, **chosen}
        write_json(act.partial / RENDER_RECORD, record)  # last: its presence means the folder is complete
        folder = self.outdir.commit(act.partial, p.job.id)
        self._active.pop(p.job.id, None)
        wall = round(time.monotonic() - act.started, 3)
        # The store first: a run killed between the two then never leaves a take that the manifest calls
        # done looking interrupted in the studio's history.
        self._record("done", p.job.id, takes, folder)
        self.manifest.set(p.job.line, outcome="done", seeds=[t["seed"] for t in takes], finished=now_iso(),
                          files=[{k: f"{p.job.id}/{v}" for k, v in t["files"].items()} for t in takes],
                          timings_s=e.timings, wall_s=wall, lyrics_check=[t["lyrics_check"] for t in takes],
                          **chosen)
        self.manifest.write("running")
        self.progress.end(p.job.id, "done")

    def _fail(self, p: Pending, error: str, take: int | None, last_events: list[dict[str, Any]]) -> None:
        from studio.store import FAILED

        failure = {"id": p.job.id, "line": p.job.line, "status": "failed", "error": error, "take": take,
                   "identity_hash": p.ident_hash, "identity": p.ident, "request": p.job.raw,
                   "last_events": last_events, "at": now_iso()}
        self.outdir.write_failure(p.job.id, failure)
        self._record("ended", p.job.id, FAILED, error)  # the store before the manifest, as in _done
        self.manifest.set(p.job.line, id=p.job.id, outcome="failed", error=error, finished=now_iso(),
                          folder=p.job.id)
        self.manifest.write("running")
        if p.job.id not in self._started_ids:
            self.progress.start(p.job.id, p.job.request.variations)
        self.progress.end(p.job.id, "failed", error)

    def _cancelled(self, act: Active, reason: str) -> None:
        from studio.store import CANCELLED

        p = act.pending
        self._active.pop(p.job.id, None)
        self.outdir.discard(act.partial)  # an earlier, complete folder of this id (if any) stays as it was
        started = p.job.id in self._started_ids
        # A job still waiting in the engine's queue never began: say so rather than "cancelled".
        self.manifest.set(p.job.line, outcome="cancelled" if started else "not-started", error=reason,
                          finished=now_iso(), folder=None)
        self._record("ended", p.job.id, CANCELLED, reason)
        if started:
            self.progress.end(p.job.id, "cancelled", reason)

    def _cancel_all(self) -> None:
        from engine import events as ev

        for act in list(self._active.values()):
            if not act.audio_complete():  # a made song keeps its files; only its lyrics check is left
                act.handle.cancel("interrupted (Ctrl-C)")
        deadline = time.monotonic() + CANCEL_WAIT_S
        while self._active and time.monotonic() < deadline:
            try:
                job_id, event = self._events.get(timeout=0.2)
            except queue.Empty:
                continue
            if isinstance(event, (ev.Done, ev.Failed, ev.Cancelled)):
                self._handle(job_id, event)  # a job that finished meanwhile keeps its real outcome
        for act in list(self._active.values()):  # the engine never answered: still ours to report
            self._cancelled(act, "interrupted (Ctrl-C); the engine did not confirm in time")


class Interrupts:
    """First Ctrl-C (or SIGTERM): `on_first` (the runner's stop); the second: kill our own workers and
    exit at once with status 130. `worker_pids` are the local worker processes this run started."""

    def __init__(self, on_first: Callable[[], None], say: Callable[[str], None],
                 exit_now: Callable[[int], None] = os._exit) -> None:
        self.on_first, self.say, self.exit_now = on_first, say, exit_now
        self.count = 0
        self.worker_pids: list[int] = []
        self._previous: dict[int, Any] = {}

    def install(self) -> Interrupts:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self.handle)
        return self

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def handle(self, signum: int = signal.SIGINT, frame: Any = None) -> None:
        self.count += 1
        if self.count == 1:
            self.say("\nstopping: cancelling the job in flight; press Ctrl-C again to quit at once")
            self.on_first()
            return
        self.say("\nquitting at once: the job in flight is left unfinished (its hidden temporary folder is "
                 "removed by the next run)")
        for pid in self.worker_pids:  # our own children, by id: they would outlive us holding the device
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        sys.stderr.flush()
        self.exit_now(EXIT_INTERRUPTED)
