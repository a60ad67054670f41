"""The take runner: turns Generate clicks into engine jobs and keeps the store in step with them.

One engine job holds a request's variations; each variation is one row in the store (`takes`). A
background thread per job follows the job's events and writes them to the store (progress throttled),
so a take's state does not depend on any browser tab: closing or refreshing a tab loses nothing, and
the tab that comes back re-attaches with `follow()`. Jobs are submitted non-interactive for the same
reason: a song keeps rendering when its tab closes, and it is there when the musician returns.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np

from studio import memory
from studio.progress import PREPARE_SHARE, PROGRESS_WRITE_S, progress_of, read_record, store_finished, unit_of
from studio.store import (
    CANCELLED,
    DONE,
    FAILED,
    FINAL_STATUSES,
    INTERRUPTED,
    QUEUED,
    RUNNING,
    Store,
    TakeInfo,
)

logger = logging.getLogger(__name__)

# Early-playback audio held for takes still rendering, all together: a 285 s take is 100 MB of float32,
# and forty in flight grew the studio past 800 MB. Past the budget the oldest take's preview audio goes
# (its file still arrives; only listening before it is written is lost for it).
PREVIEW_BUDGET_BYTES = 192 * 2**20
KEEP_FINISHED = 256  # finished takes kept in memory for followers; the store has every take


class EngineLike(Protocol):
    """What the take runner needs from `engine.Engine` (issue 6)."""

    def submit(self, request: Any, *, interactive: bool = False, validation: Any = None) -> Any: ...


@dataclass
class LiveTake:
    """In-memory view of one take while it renders: the store holds the same minus the audio chunks."""

    take_id: str
    status: str = QUEUED
    progress: float = 0.0
    phase: str = "queued"
    eta_s: float | None = None
    queue_position: int | None = None
    seed: int | None = None
    chunks: list[np.ndarray] = field(default_factory=list)  # early-playback audio, float32 [n, 2]
    preview_dropped: bool = False  # chunks given up to the memory budget: no early playback for this take
    unit: tuple[str, int, int] | None = None  # the last ("step", k, N) or ("window", j, M)
    version: int = 0  # bumped on every change, so followers only redraw when something moved


@dataclass
class StreamCursor:
    """Where one listener of a take's live audio is (`TakeRunner.read_stream`)."""

    take_id: str
    held: list[np.ndarray] | None = None  # the chunk list being read (a retry starts a new one)
    used: int = 0  # chunks of `held` read
    pos: int = 0  # samples those chunks cover
    sent: int = 0  # samples handed out


class TakeRunner:
    """Submits requests to the engine and mirrors each job's events into the store."""

    def __init__(self, engine: EngineLike, store: Store) -> None:
        self.engine = engine
        self.store = store
        self._lock = threading.Condition()
        self._live: dict[str, LiveTake] = {}
        self._jobs: dict[str, Any] = {}  # take id -> engine job
        # True while the model loads (set by Services): waiting takes say so, with their place in line.
        self.model_loading: Callable[[], bool] = lambda: False

    # ------------------------------------------------------------------ submit / cancel
    def submit(self, session_id: str, request: Any, *, parent_id: str | None = None,
               validation: Any = None) -> list[TakeInfo]:
        """Record one take per variation, then hand the request to the engine. Returns the new takes.

        The seed is fixed here (drawn when the musician asked for a random one) so every take's row
        holds its actual seed from the first moment, even if the process dies before the worker starts.
        """
        request = request.with_seed()
        seeds = request.seeds()
        payload = request.to_dict()
        takes = [
            self.store.add_take(session_id, payload, parent_id=parent_id, variation=i, seed=seed)
            for i, seed in enumerate(seeds)
        ]
        try:
            job = self.engine.submit(request, interactive=False, validation=validation)  # None: the engine validates
        except Exception as exc:  # busy queue, validation: the takes become failed with the reason
            for t in takes:
                self.store.update_take(t.id, status=FAILED, error=_error(exc), phase="not started")
            raise
        with self._lock:
            for i, t in enumerate(takes):
                self._live[t.id] = LiveTake(t.id, seed=t.seed)
                self._jobs[t.id] = (job, i)
        if self.model_loading():
            for t in takes:
                self._say_waiting_for_model(t.id)
        threading.Thread(
            target=self._mirror, args=(job, [t.id for t in takes]), name=f"take-{job.id}", daemon=True
        ).start()
        return takes

    def cancel(self, take_id: str) -> bool:
        """Cancel this take only: its sibling variations go on. False when it is not running."""
        with self._lock:
            job, index = self._jobs.get(take_id, (None, 0))
        return job is not None and bool(job.cancel_take(index, "cancelled"))

    def cancel_job(self, take_id: str) -> bool:
        """Cancel the whole job that renders `take_id` (every variation). False when it is not running."""
        with self._lock:
            job, _ = self._jobs.get(take_id, (None, 0))
        if job is None:
            return False
        job.cancel("cancelled")
        return True

    def shutdown(self) -> list[str]:
        """Before the engine closes: takes still queued or running become "interrupted" (retryable), the
        same outcome as a crash, instead of looking like the musician cancelled them."""
        with self._lock:
            active = [(tid, lv.phase) for tid, lv in self._live.items() if lv.status in (QUEUED, RUNNING)]
        for tid, phase in active:
            self.store.update_take(tid, status=INTERRUPTED, phase=f"interrupted while {phase}: the studio stopped")
            self._set_live(tid, status=INTERRUPTED, phase="interrupted: the studio stopped", eta_s=None)
        return [tid for tid, _ in active]

    def live(self, take_id: str) -> LiveTake | None:
        with self._lock:
            return self._live.get(take_id)

    def running(self) -> int:
        with self._lock:
            return sum(1 for lv in self._live.values() if lv.status in (QUEUED, RUNNING))

    # ------------------------------------------------------------------ following
    def follow(self, take_ids: list[str], timeout_s: float = 1.0,
               min_gap_s: float = 0.0) -> Iterator[dict[str, LiveTake]]:
        """Yield a snapshot of the takes' live state whenever it changes (and at least every
        `timeout_s`), until none of them is queued or running any more in this process. With `min_gap_s`,
        snapshots come at most that often: the changes in between arrive together in the next one."""
        seen = -1
        last = -min_gap_s
        while True:
            if min_gap_s:
                time.sleep(max(0.0, last + min_gap_s - time.monotonic()))
            with self._lock:
                version = sum(self._live[t].version for t in take_ids if t in self._live)
                if version == seen:
                    self._lock.wait(timeout_s)
                    version = sum(self._live[t].version for t in take_ids if t in self._live)
                # Copies: the mirror thread goes on changing the live state while the page draws this one.
                snap = {t: replace(self._live[t], chunks=list(self._live[t].chunks))
                        for t in take_ids if t in self._live}
                seen = version
                active = any(lv.status in (QUEUED, RUNNING) for lv in snap.values())
            last = time.monotonic()
            yield snap
            if not active:
                return

    # ------------------------------------------------------------------ the mirror thread
    def _mirror(self, job: Any, take_ids: list[str]) -> None:
        from engine import events as ev  # lazy: the studio opens even where the engine cannot load

        last_write: dict[str, float] = {}

        def apply(batch: list[tuple[int | None, dict[str, Any]]], *, write: bool = True, force: bool = False) -> None:
            """Changes to several takes under one lock: a follower sees all of them or none (a Queued event's
            ETAs, applied take by take, were once drawn half old: 13 s for the next take, 3 s behind it)."""
            writes: list[tuple[str, dict[str, Any], bool]] = []
            with self._lock:
                for i, changes in batch:
                    # A finished variation keeps its final state (job-level events name every take).
                    targets = [t for t in (take_ids if i is None else [take_ids[i]])
                               if t in self._live and self._live[t].status not in FINAL_STATUSES]
                    for tid in targets:
                        lv = self._live[tid]
                        # status changes always reach the store; progress may be throttled
                        forced = force or ("status" in changes and changes["status"] != lv.status)
                        for k, v in changes.items():
                            setattr(lv, k, v)
                        lv.version += 1
                        writes.append((tid, changes, forced))
                self._lock.notify_all()
            if not write:
                return
            now = time.monotonic()
            for tid, changes, forced in writes:
                if forced or now - last_write.get(tid, 0.0) >= PROGRESS_WRITE_S:
                    last_write[tid] = now
                    fields = {k: v for k, v in changes.items() if k in ("status", "progress", "phase", "seed")}
                    self.store.update_take(tid, **fields)

        def update(i: int | None, *, write: bool = True, force: bool = False, **changes: Any) -> None:
            apply([(i, changes)], write=write, force=force)

        started: set[int] = set()  # takes that reached a worker
        try:
            for e in job:
                if isinstance(e, (ev.Queued, ev.Preparing)) and self.model_loading():
                    for tid in take_ids:  # nothing runs before a worker is up: say so, and where it stands
                        self._say_waiting_for_model(tid)
                elif isinstance(e, ev.Queued):
                    batch: list[tuple[int | None, dict[str, Any]]] = []
                    for i, tid in enumerate(take_ids):
                        if i in e.takes:  # in line: takes ahead of it, its own siblings included
                            k = e.takes.index(i)
                            place = e.ahead + k + 1
                            eta = e.etas_s[k] if k < len(e.etas_s) else e.eta_s
                            batch.append((i, dict(status=QUEUED, queue_position=place, eta_s=eta,
                                                  phase=queue_phase(place))))
                        elif (lv := self.live(tid)) is not None and lv.queue_position is not None:
                            batch.append((i, dict(queue_position=None, eta_s=None, phase="starting")))
                    apply(batch, force=True)
                elif isinstance(e, ev.Preparing):
                    for i, tid in enumerate(take_ids):  # takes still in line keep their place
                        if (lv := self.live(tid)) is not None and lv.queue_position is None:
                            update(i, status=RUNNING, progress=0.01,
                                   phase=f"preparing {e.what}" + (f": {e.detail}" if e.detail else ""))
                elif isinstance(e, ev.Held):
                    # It and the siblings after it (they reach the card in order) wait for an earlier
                    # variation's first sound; they had kept saying "preparing" meanwhile.
                    for i in range(e.take, len(take_ids)):
                        if i not in started and (lv := self.live(take_ids[i])) is not None and lv.queue_position is None:
                            update(i, force=True, phase=f"waits for #{e.behind + 1} to sound first")
                elif isinstance(e, ev.Running):
                    started.add(e.take)
                    update(e.take, force=True, status=RUNNING, seed=e.seed, progress=PREPARE_SHARE, queue_position=None,
                           # The worker's name (w0:torch:cpu) is for the record, not the musician.
                           phase="starting" + (f" (attempt {e.attempt})" if e.attempt > 1 else ""))
                elif (moved := progress_of(e)) is not None:
                    update(e.take, progress=moved[0], eta_s=e.eta_s, phase=moved[1], unit=unit_of(e))
                elif isinstance(e, ev.AudioChunk):
                    self._add_chunk(take_ids[e.take], np.asarray(e.audio, dtype=np.float32), e.start)
                elif isinstance(e, ev.Retrying):
                    update(e.take, force=True, phase=f"retrying (attempt {e.attempt}): {e.reason}")
                elif isinstance(e, ev.TakeDone):
                    self._finish_take(take_ids[e.result.take], e.result)
                elif isinstance(e, ev.LyricsChecked):  # after the take is playable: its record gains the check
                    self._lyrics_checked(take_ids[e.take], e.files.get("json"))
                elif isinstance(e, ev.Failed):
                    targets = take_ids if e.take is None else [take_ids[e.take]]
                    for tid in targets:
                        self._end(tid, FAILED, "failed", error=e.error)
                elif isinstance(e, ev.TakeCancelled):
                    self._end(take_ids[e.take], CANCELLED, "cancelled on its own")
                elif isinstance(e, ev.Cancelled):
                    for tid in take_ids:
                        self._end(tid, CANCELLED, e.reason or "cancelled")
                elif isinstance(e, ev.Done):
                    for res in e.takes:  # takes whose TakeDone we somehow missed
                        self._finish_take(take_ids[res.take], res)
        except Exception as exc:  # never leave a take "running" because the mirror itself broke
            logger.exception("[studio] mirror failed job=%s", getattr(job, "id", "?"))
            for tid in take_ids:
                self._end(tid, FAILED, "failed", error=f"studio: {_error(exc)}")
        finally:
            for tid in take_ids:  # a job that ended without a word about a take
                lv = self.live(tid)
                if lv is not None and lv.status in (QUEUED, RUNNING):
                    self._end(tid, FAILED, "failed", error="the engine ended the job without this take")
            with self._lock:
                for tid in take_ids:
                    self._jobs.pop(tid, None)
            memory.trim()  # the job's audio (windows, preview chunks) is freed now: give it back

    def _say_waiting_for_model(self, take_id: str) -> None:
        """Phase "waiting for the model to load" with the take's place among the takes waiting with it."""
        with self._lock:
            waiting = [t for t, lv in self._live.items() if lv.status in (QUEUED, RUNNING)]
        place = waiting.index(take_id) + 1 if take_id in waiting else 1
        phase = f"waiting for the model to load ({ordinal(place)} in line)"
        self._set_live(take_id, status=QUEUED, queue_position=place, phase=phase)
        self.store.update_take(take_id, status=QUEUED, phase=phase)

    def _add_chunk(self, take_id: str, audio: np.ndarray, start: int = -1) -> None:
        with self._lock:
            lv = self._live.get(take_id)
            if lv is None or lv.preview_dropped:
                return
            if start == 0 and lv.chunks:  # a retry decodes the song again from its start: a new list
                lv.chunks = []
            lv.chunks.append(audio)
            lv.version += 1
            held = [x for x in self._live.values() if x.chunks]  # insertion order: oldest take first
            total = sum(c.nbytes for x in held for c in x.chunks)
            for old in held:
                if total <= PREVIEW_BUDGET_BYTES or old is lv:
                    break
                total -= sum(c.nbytes for c in old.chunks)
                old.chunks, old.preview_dropped = [], True
                old.version += 1
            self._lock.notify_all()

    def read_stream(self, cursor: StreamCursor) -> tuple[list[np.ndarray], bool]:
        """The take's decoded audio the cursor has not had yet, and whether the stream is over. Never
        blocks (a server polls it from its event loop, holding no thread per listener).

        Each sample goes out once and in order: a retry's audio (same seed, same samples) resumes
        where the listener is; a take that ends still hands out what it had; a take whose preview
        audio went to the memory budget ends its stream (its file still comes)."""
        with self._lock:
            lv = self._live.get(cursor.take_id)
            if lv is None or lv.preview_dropped:
                return [], True
            final = lv.status in FINAL_STATUSES
            if cursor.held is None or (lv.chunks is not cursor.held and not final):
                cursor.held, cursor.used, cursor.pos = lv.chunks, 0, 0
            new = cursor.held[cursor.used:]
            cursor.used += len(new)
        out = []
        for c in new:
            skip = cursor.sent - cursor.pos
            cursor.pos += len(c)
            if skip < len(c):
                out.append(c[max(0, skip):])
                cursor.sent = cursor.pos
        if final:
            cursor.held = None  # done with it: the take's audio can be freed
        return out, final

    def _finish_take(self, take_id: str, result: Any) -> None:
        lv = self.live(take_id)
        if lv is not None and lv.status == DONE:
            return
        store_finished(self.store, take_id, result.seed, result.files, result.timings)
        self._set_live(take_id, status=DONE, progress=1.0, phase="done", eta_s=0.0, seed=result.seed)

    def _lyrics_checked(self, take_id: str, record_path: str | None) -> None:
        record = read_record(record_path)
        if "lyrics_check" in record:
            self.store.update_take(take_id, record=record)
            with self._lock:
                if (lv := self._live.get(take_id)) is not None:
                    lv.version += 1
                    self._lock.notify_all()

    def _end(self, take_id: str, status: str, phase: str, *, error: str | None = None) -> None:
        lv = self.live(take_id)
        if lv is not None and lv.status in FINAL_STATUSES:
            return
        self.store.update_take(take_id, status=status, phase=phase, error=error)
        self._set_live(take_id, status=status, phase=phase, eta_s=None)

    def _set_live(self, take_id: str, **changes: Any) -> None:
        with self._lock:
            lv = self._live.setdefault(take_id, LiveTake(take_id))
            for k, v in changes.items():
                setattr(lv, k, v)
            if changes.get("status") in FINAL_STATUSES:
                lv.chunks = []  # the file is the reference now; free the early-playback audio
                self._forget_old_finished()
            lv.version += 1
            self._lock.notify_all()

    def _forget_old_finished(self) -> None:
        """Keep the newest KEEP_FINISHED finished takes in memory (under the lock)."""
        finished = [t for t, x in self._live.items() if x.status in FINAL_STATUSES]
        for tid in finished[:-KEEP_FINISHED] if len(finished) > KEEP_FINISHED else []:
            del self._live[tid]


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def queue_phase(place: int) -> str:
    """A waiting take's phase, in the words the page shows."""
    return "waiting: next in line" if place == 1 else f"waiting: {ordinal(place)} in line"


def _error(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
