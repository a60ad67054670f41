"""Three stages, pipelined: host input -> device -> host output, with bounded queues between them.

    submit -> [waiting queue, max `queue_limit` takes; BusyError beyond]
           -> admission (at most `max_ready` takes past the queue)
           -> input thread(s): lyrics layout, style embedding, reference encode (once per job)
           -> device stage: the worker pool (blocks while every worker is full: back-pressure)
           -> output thread(s): post-processing, encoding, tags, record, files

Because at most `max_ready` takes are past the queue, every queue behind admission is bounded by it:
while the card works on one song the next one is prepared and the last one written, and host work can
never pile up. Any exception in a stage becomes that job's `Failed("ExceptionName: message")`; the
stage's thread lives on and other jobs continue.
"""

from __future__ import annotations

import collections
import logging
import queue
import threading
import time
from collections.abc import Callable

import numpy as np

from engine.eta import EtaBoard, TakeEta
from engine.events import (
    AudioChunk,
    Cancelled,
    Decoding,
    Done,
    Failed,
    Held,
    Queued,
    Retrying,
    Running,
    Step,
    TakeCancelled,
    TakeDone,
    TakeResult,
    error_text,
)
from engine.units import BusyError, DeviceStage, JobContext, Prepared, Stopping, Unit, job_timings

logger = logging.getLogger(__name__)


class Pipeline:
    def __init__(self, *, prepare: Callable[[JobContext], Prepared], device: DeviceStage,
                 write: Callable[[Unit], TakeResult], max_ready: int, queue_limit: int,
                 input_threads: int = 1, output_threads: int = 1,
                 after_write: Callable[[Unit, TakeResult, Callable[[], None]], bool] | None = None):
        # after_write(unit, result, finished): once a take is written and announced (the lyrics check); True:
        # it took the take and calls finished() later, and the job's terminal event waits for that.
        if max_ready < 1 or queue_limit < 0:
            raise ValueError("max_ready must be >= 1 and queue_limit >= 0")
        self._prepare, self._device, self._write = prepare, device, write
        self._after_write = after_write
        self.max_ready, self.queue_limit = max_ready, queue_limit
        self._lock = threading.Lock()
        self._waiting: collections.deque[Unit] = collections.deque()
        self._in_flight = 0
        self._contexts: set[JobContext] = set()  # jobs not yet ended
        self._closed = False
        # Bounded by admission: never more than max_ready units exist behind it.
        # (+ one slot per thread for its shutdown sentinel)
        self._input_q: queue.Queue[Unit | None] = queue.Queue(maxsize=max_ready + input_threads)
        self._ready_q: queue.Queue[Unit | None] = queue.Queue(maxsize=max_ready + 1)
        self._output_q: queue.Queue[Unit | None] = queue.Queue(maxsize=max_ready + output_threads)
        self.etas = EtaBoard(max_ready)  # every ETA figure published (Queued, Step, Decoding)
        # Each stage thread with the queue it reads (close puts one sentinel per thread on it).
        self._threads: list[tuple[threading.Thread, queue.Queue[Unit | None]]] = (
            [(self._spawn(self._input_loop, f"engine-input-{i}"), self._input_q) for i in range(input_threads)]
            + [(self._spawn(self._device_loop, "engine-device"), self._ready_q)]
            + [(self._spawn(self._output_loop, f"engine-output-{i}"), self._output_q) for i in range(output_threads)]
        )

    def _spawn(self, target: Callable[[], None], name: str) -> threading.Thread:
        t = threading.Thread(target=target, name=name, daemon=True)
        t.start()
        return t

    # -- admission --------------------------------------------------------------------------------
    def submit(self, ctx: JobContext) -> None:
        ctx.job.route_cancels(lambda _reason: self.cancel(ctx),
                              lambda take, reason: self.cancel_take(ctx, take, reason))
        units = [Unit(ctx, take, seed) for take, seed in enumerate(ctx.seeds)]
        with self._lock:
            if self._closed:
                raise RuntimeError("the engine is closed")
            free = self.queue_limit - len(self._waiting) + max(self.max_ready - self._in_flight, 0)
            if len(units) > free:
                raise BusyError(
                    f"the queue is full ({len(self._waiting)} takes waiting, limit {self.queue_limit}); "
                    "try again when some songs have finished")
            # Tell the job where it stands before any stage can publish about it.
            busy = bool(self._waiting) or self._in_flight >= self.max_ready
            ahead = len(self._waiting)
            position = len({id(u.ctx) for u in self._waiting}) + 1 if busy else 0
            waiting = tuple(u.take for u in units) if busy else ()
            ctx.job.publish(self._queued(ctx, position, ahead, waiting) if busy else Queued(ctx.job.id, position=0, ahead=0))
            ctx.last_position = (position, waiting)
            self._waiting.extend(units)
            self._contexts.add(ctx)
        self._admit()

    def waiting(self) -> int:
        with self._lock:
            return len(self._waiting)

    def in_flight(self) -> int:
        with self._lock:
            return self._in_flight

    def _admit(self) -> None:
        admitted: list[Unit] = []
        with self._lock:
            while self._waiting and self._in_flight < self.max_ready:
                unit = self._waiting.popleft()
                unit.ctx.waiting -= 1
                if unit.stopping:
                    self._settle_locked(unit.ctx)
                    continue
                self._in_flight += 1
                self.etas.flight[id(unit)] = unit
                unit.ctx.unfinished.add(unit.take)
                unit.admitted = time.monotonic()
                admitted.append(unit)
            positions = self._positions_locked()
        for unit in admitted:
            self._input_q.put(unit)  # never blocks: at most max_ready units are past admission
        for unit in admitted:  # a half-admitted job: say which of its takes still wait (maybe none now)
            ctx = unit.ctx
            if ctx not in positions and ctx.last_position and 0 < len(ctx.last_position[1]) < len(ctx.seeds):
                ctx.last_position = (0, ())
                ctx.job.publish(Queued(ctx.job.id, position=0, ahead=0))
        for ctx, (position, ahead, takes) in positions.items():
            if ctx.last_position != (position, takes):
                ctx.last_position = (position, takes)
                ctx.job.publish(self._queued(ctx, position, ahead, takes))

    def _positions_locked(self) -> dict[JobContext, tuple[int, int, tuple[int, ...]]]:
        """Per job with takes waiting: (position among the waiting jobs, takes ahead, its waiting takes)."""
        out: dict[JobContext, tuple[int, int, tuple[int, ...]]] = {}
        for i, unit in enumerate(self._waiting):
            if unit.stopping:
                continue
            if unit.ctx not in out:
                out[unit.ctx] = (len(out) + 1, i, ())
            position, ahead, takes = out[unit.ctx]
            out[unit.ctx] = (position, ahead, (*takes, unit.take))
        return out

    def _queued(self, ctx: JobContext, position: int, ahead: int, takes: tuple[int, ...]) -> Queued:
        """Where the job's waiting takes stand, each with its own ETA (the k-th has `ahead + k` in front)."""
        etas = self.etas.waiting(ahead, int(ctx.request.steps), len(takes))
        return Queued(ctx.job.id, position=position, ahead=ahead, takes=takes, eta_s=etas[0] if etas else None,
                      etas_s=etas)

    def _refresh_waiting(self) -> None:
        """Every few seconds while takes step, the waiting jobs hear a fresh ETA (their place is unchanged)."""
        if not self.etas.due():
            return
        with self._lock:
            positions = self._positions_locked()
        for ctx, (position, ahead, takes) in positions.items():
            ctx.job.publish(self._queued(ctx, position, ahead, takes))

    # -- the three stages -------------------------------------------------------------------------
    def _input_loop(self) -> None:
        while (unit := self._input_q.get()) is not None:
            ctx = unit.ctx
            try:
                if unit.stopping:
                    raise Stopping
                with ctx.prepare_lock:  # the first take prepares; its siblings reuse the result
                    if ctx.prepared is None:
                        ctx.prepared = self._prepare(ctx)
                if unit.stopping:
                    raise Stopping
                unit.eta = self._new_eta(unit)
                self._ready_q.put(unit)
            except Stopping:
                self._finish(unit)
            except Exception as exc:  # noqa: BLE001 - any failure here belongs to this job only
                logger.exception("job %s: preparing failed", ctx.job.id)
                self._fail(unit, error_text(exc))

    def _device_loop(self) -> None:
        while (unit := self._ready_q.get()) is not None:
            if unit.stopping:
                self._finish(unit)
                continue
            try:
                self._device.place(unit, self)  # blocks while every worker is full
            except Stopping:
                self._finish(unit)
            except Exception as exc:  # noqa: BLE001
                logger.exception("job %s: device stage refused take %d", unit.job.id, unit.take)
                self._fail(unit, error_text(exc))

    def _output_loop(self) -> None:
        while (unit := self._output_q.get()) is not None:
            try:
                if unit.stopping:
                    raise Stopping
                result = self._write(unit)
                unit.blocks.clear()  # the audio is on disk now; free it before anything else waits
                with self._lock:
                    if unit.take in unit.ctx.cancelled:  # cancelled while it was being written
                        raise Stopping
                    unit.ctx.results[unit.take] = result
                    took = time.monotonic() - unit.admitted
                    self.etas.take_done(took)
                unit.job.publish(TakeDone(unit.job.id, result=result))
                self._after(unit, result)
                self._finish(unit)
            except Stopping:
                self._finish(unit)
            except Exception as exc:  # noqa: BLE001
                logger.exception("job %s: writing take %d failed", unit.job.id, unit.take)
                self._fail(unit, error_text(exc))

    def _after(self, unit: Unit, result: TakeResult) -> None:
        """Hand the written take to `after_write`; the job stays open until it says it has finished."""
        ctx = unit.ctx
        with self._lock:
            ctx.checking += 1
        try:
            taken = self._after_write is not None and self._after_write(unit, result, lambda: self._checked(ctx))
        except Exception:  # noqa: BLE001 - the take is written; an after-step never fails it
            logger.exception("job %s: after-write step of take %d failed", unit.job.id, unit.take)
            taken = False
        if not taken:
            self._checked(ctx)

    def _checked(self, ctx: JobContext) -> None:
        with self._lock:
            ctx.checking -= 1
            self._settle_locked(ctx)

    # -- DeviceSink: called from the device stage's threads --------------------------------------
    def running(self, unit: Unit, worker: str) -> None:
        unit.worker = worker
        if unit.eta is not None:
            unit.eta.started()
        unit.job.publish(Running(unit.job.id, take=unit.take, seed=unit.seed, worker=worker, attempt=unit.attempt))

    def held(self, unit: Unit, behind: int) -> None:
        unit.job.publish(Held(unit.job.id, take=unit.take, behind=behind))

    def step(self, unit: Unit, k: int, total: int, seconds: float) -> None:
        eta_s = self.etas.step(unit.eta or self._new_eta(unit), k, total, seconds)
        # The worker counts updates (N - 1 for N steps asked); the musician asked for N points in time.
        asked = max(int(getattr(unit.ctx.request, "steps", 0) or 0), total)
        unit.job.publish(Step(unit.job.id, take=unit.take, k=k + asked - total, total=asked, step_s=seconds,
                              eta_s=eta_s))
        self._refresh_waiting()

    def window(self, unit: Unit, j: int, total: int, seconds: float, start: int, audio: np.ndarray) -> None:
        frames = unit.ctx.prepared.frames if unit.ctx.prepared is not None else None
        eta_s = self.etas.window(unit.eta or TakeEta(steps=0, windows=total), frames, j, total, seconds)
        if unit.first_sound_at is None:  # the musician can hear it from here (the page streams it)
            unit.first_sound_at = time.monotonic()
        unit.blocks.append((start, audio))
        job = unit.job
        job.publish(Decoding(job.id, take=unit.take, j=j, total=total, window_s=seconds, eta_s=eta_s))
        # A transposed view, not a copy: a long song's audio is held once until it is written.
        job.publish(AudioChunk(job.id, take=unit.take, j=j, total=total, start=start, audio=audio.T))

    def done(self, unit: Unit, timings: dict[str, float]) -> None:
        unit.device_timings = dict(timings)
        self._output_q.put(unit)  # bounded by admission; the writer keeps up or the card waits

    def error(self, unit: Unit, text: str) -> None:
        self._fail(unit, text)

    def cancelled(self, unit: Unit) -> None:
        self._finish(unit)

    def lost(self, unit: Unit, reason: str, alone: bool = True) -> None:
        """The unit's worker died or hung: run the take again from scratch (same seed, same bytes), alone
        on a worker; fail it when the death is charged to it a second time (`Unit.charge`)."""
        if unit.stopping:
            self._finish(unit)
            return
        if not unit.charge(alone):
            self._fail(unit, f"WorkerDeadError: {reason} (take {unit.take} already retried once, alone on "
                             "a worker: it is the likely cause)")
            return
        unit.blocks.clear()
        unit.first_sound_at = None  # the retry's audio is what plays and is kept
        unit.eta = self._new_eta(unit)
        note = "" if alone else " (it shared the worker: retried alone, not counted against it)"
        unit.job.publish(Retrying(unit.job.id, take=unit.take, attempt=unit.attempt, reason=reason + note))
        self._ready_q.put(unit)

    def _new_eta(self, unit: Unit) -> TakeEta:
        return self.etas.new_take(unit.ctx.prepared.frames if unit.ctx.prepared is not None else 0,
                                  int(unit.ctx.request.steps))

    # -- endings ----------------------------------------------------------------------------------
    def cancel(self, ctx: JobContext) -> None:
        """Called when the job's cancel is requested: drop its waiting takes, stop its device work."""
        with self._lock:
            kept = collections.deque(u for u in self._waiting if u.ctx is not ctx)
            dropped = len(self._waiting) - len(kept)
            self._waiting = kept
            ctx.waiting -= dropped
            self._settle_locked(ctx)
        for unit in self._device.units_of(ctx):
            try:
                self._device.cancel(unit)
            except Exception:  # noqa: BLE001 - a dead worker cannot cancel; loss is reported anyway
                logger.exception("cancel of %s failed", unit.key)
        self._admit()

    def cancel_take(self, ctx: JobContext, take: int, reason: str) -> bool:
        """Cancel one variation: drop it from the queue or stop it on its worker; its siblings go on.
        False when it has already ended (written, cancelled, or the job is over)."""
        with self._lock:
            if ctx.ended or take in ctx.results or take in ctx.cancelled or not 0 <= take < len(ctx.seeds):
                return False
            ctx.cancelled[take] = reason
            kept = collections.deque(u for u in self._waiting if not (u.ctx is ctx and u.take == take))
            ctx.waiting -= len(self._waiting) - len(kept)
            self._waiting = kept
            ctx.job.publish(TakeCancelled(ctx.job.id, take=take, reason=reason))
            self._settle_locked(ctx)
        for unit in self._device.units_of(ctx):
            if unit.take == take:
                try:
                    self._device.cancel(unit)
                except Exception:  # noqa: BLE001 - a dead worker cannot cancel; loss is reported anyway
                    logger.exception("cancel of %s failed", unit.key)
        self._admit()
        return True

    def _fail(self, unit: Unit, text: str) -> None:
        ctx = unit.ctx
        first = False
        with self._lock:
            if ctx.error is None and not ctx.ended:
                ctx.error = text
                first = True
        if first:
            logger.warning("job %s failed: %s", ctx.job.id, text)
            self.cancel(ctx)  # siblings stop: the job has failed
        self._finish(unit)

    def _finish(self, unit: Unit) -> None:
        with self._lock:
            if unit.take in unit.ctx.unfinished:
                unit.ctx.unfinished.discard(unit.take)
                self._in_flight -= 1
            self.etas.flight.pop(id(unit), None)
            self._settle_locked(unit.ctx)
        self._admit()

    def _settle_locked(self, ctx: JobContext) -> None:
        """Publish the job's terminal event once nothing of it is waiting or in flight."""
        if ctx.ended or ctx.unfinished or ctx.waiting > 0 or ctx.checking > 0:
            return
        if ctx.error is None and not ctx.job.cancel_requested and len(ctx.results) + len(ctx.cancelled) < len(ctx.seeds):
            return
        ctx.ended = True
        self._contexts.discard(ctx)
        job = ctx.job
        if ctx.error is not None:
            event = Failed(job.id, error=ctx.error)
        elif job.cancel_requested or not ctx.results:  # the job's Cancel, or each take cancelled on its own
            event = Cancelled(job.id, reason=job.cancel_reason or next(iter(ctx.cancelled.values()), "cancelled"))
        else:
            takes = tuple(ctx.results[t] for t in sorted(ctx.results))
            event = Done(job.id, takes=takes, timings=job_timings(ctx, takes))
        # Publishing under the lock keeps one terminal event per job; subscribers never block on us.
        job.publish(event)

    def close(self, grace_s: float = 10.0) -> None:
        """Cancel every job, give the units in flight `grace_s` to end, then stop the stage threads.
        Jobs still running after that end as Cancelled. The device stage is closed by its owner, after."""
        with self._lock:
            self._closed = True
            contexts = list(self._contexts)
        for ctx in contexts:
            ctx.job.cancel("the engine is shutting down")
        deadline = time.monotonic() + grace_s
        while self.in_flight() and time.monotonic() < deadline:
            time.sleep(0.02)
        with self._lock:
            for ctx in list(self._contexts):
                ctx.unfinished.clear()
                ctx.waiting = ctx.checking = 0
                self._settle_locked(ctx)
        # The queues have a spare slot per thread, so these sentinels never block.
        for _, q in self._threads:
            q.put(None)
        for t, _ in self._threads:
            t.join(timeout=5)
