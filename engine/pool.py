"""The device stage: placement of takes on the worker slots (`engine.slots`), and the relay of their events.

Placement: a take goes to the least-loaded ready worker that holds the DiT its duration needs (95 s:
base, 96-285 s: full) and has room (the worker's `max_jobs`, from its handshake), and stays there: its
sampler state lives on that card. If no worker holds the needed DiT, an idle local worker is restarted
with it. When every worker is full, `place` blocks: that is the pipeline's back-pressure. While a slot
is still within its backoff list a take waits for it; once every slot that could run the take is past
the list, the take fails at once with the workers' own reasons instead of waiting blind.

Crash isolation: a worker interleaves up to `max_jobs` takes, so when it dies the take that killed it
(a poison input, an out-of-memory song) is one of several. Each take lost is reported with whether it
was alone on the worker (`lost(..., alone=)`): the pipeline charges a retry only to a take that was
alone, and retries every lost take `isolate`d: placed only on an empty worker, and nothing joins it
there. So a second death names the take that caused it, and its neighbours finish.

Slots come from a local source (subprocesses, tcp workers) or a Ray cluster (`engine.ray_slots`).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import numpy as np

from device_worker import protocol as P
from engine.config import EngineConfig
from engine.slots import LocalSource, NoWorkerError, Slot, Slots, SlotSource
from engine.units import DeviceSink, JobContext, Stopping, Unit, sibling_sounds_first
from engine.worker_client import Worker, WorkerDeadError, WorkerError

__all__ = ["NoWorkerError", "Pool", "Slot"]

logger = logging.getLogger(__name__)


class Pool(Slots):
    def __init__(self, config: EngineConfig):
        if config.ray:
            from engine.ray_slots import RaySource  # Ray only where it is asked for

            source: SlotSource = RaySource(config)
        else:
            source = LocalSource(config)
        super().__init__(config, source)
        self.device_seconds = 0.0  # worker-measured compute (prepare + steps + decode) of finished takes

    def start(self, wait: bool = True) -> Pool:
        super().start(wait)
        return self

    # -- placement (DeviceStage) ------------------------------------------------------------------
    def place(self, unit: Unit, sink: DeviceSink) -> None:
        variant = unit.ctx.request.model_variant
        t0 = time.perf_counter()
        told = False
        with self._cond:
            while True:
                if self._failure:  # takes queued while the workers started fail with the workers' reason
                    raise NoWorkerError(self._failure)
                if self._closed:
                    raise RuntimeError("the engine is shutting down")
                if unit.ctx.stopping:
                    raise Stopping
                slot = self._choose(variant, unit.isolate)
                behind = None if slot is None else sibling_sounds_first(unit, slot.units.values())
                if slot is not None and behind is None:
                    break
                if behind is not None and not told:  # say why it waits, once (it looked stuck preparing)
                    sink.held(unit, behind)
                    told = True
                self._cond.wait(0.25)
            slot.units[unit.key] = unit
            worker = slot.worker
        unit.device_timings["worker_wait"] = round(time.perf_counter() - t0, 6)
        threading.Thread(target=self._run, args=(slot, worker, unit, sink), name=f"take-{unit.key}",
                         daemon=True).start()

    @staticmethod
    def _coming(slot: Slot) -> bool:
        """Worth waiting for: starting now, or down but still within its backoff list ("dead"); a local
        slot past the list ("restarting", between its long-interval tries) is not. A Ray seat whose node
        the cluster still lists is: on a loaded host its restarts time out for a while and then succeed,
        so its takes wait for it (backing off) rather than fail while the node is healthy."""
        return slot.state in ("new", "starting", "dead") or (
            slot.seat is not None and not slot.retired and slot.state == "restarting")

    @staticmethod
    def _has_room(slot: Slot, isolate: bool) -> bool:
        """An isolated take needs an empty worker; nothing joins a worker that runs one."""
        if isolate:
            return not slot.units
        return len(slot.units) < slot.capacity and not any(u.isolate for u in slot.units.values())

    def _choose(self, variant: str, isolate: bool = False) -> Slot | None:
        """Least-loaded ready worker with the right DiT and room; else switch an idle one; else None
        (wait); NoWorkerError, naming each worker's state and reason, when none can come for it."""
        if not self._opened:  # a take submitted before the pool put its slots in place waits for them
            return None
        ready = [s for s in self.slots if s.state == "ready" and s.variant == variant]
        roomy = [s for s in ready if self._has_room(s, isolate)]
        if roomy:
            return min(roomy, key=lambda s: (len(s.units), s.index))
        if ready or any(self._coming(s) and s.variant == variant for s in self.slots):
            return None  # wait for room, or for a worker with this DiT to come (back) up
        idle = [s for s in self.slots if s.local and s.state == "ready" and not s.units]
        if idle:  # nobody holds this DiT: reload an idle local worker with it
            slot = idle[0]
            logger.info("pool: %s switches to the %s DiT", slot.name, variant)
            worker, slot.worker, slot.state, slot.variant = slot.worker, None, "starting", variant

            def switch() -> None:
                if worker is not None:
                    worker.close()
                self._boot(slot, variant)

            threading.Thread(target=switch, name=f"pool-switch-{slot.index}", daemon=True).start()
            return None
        if any(s.local and (s.state == "ready" or self._coming(s)) for s in self.slots):
            return None  # a local worker will become idle or come back
        raise NoWorkerError(f"no worker can run a {variant}-model song now: "
                            + "; ".join(s.status() for s in self.slots))

    def cancel(self, unit: Unit) -> None:
        job = unit.handle
        if job is not None:
            job.cancel()

    def units_of(self, ctx: JobContext) -> list[Unit]:
        with self._cond:
            return [u for s in self.slots for u in s.units.values() if u.ctx is ctx]

    def _run(self, slot: Slot, worker: Worker, unit: Unit, sink: DeviceSink) -> None:
        """Submit one take to its worker and relay its events until it ends."""
        p = unit.ctx.prepared
        request = unit.ctx.request
        outcome: tuple[str, Any] = ("lost", "the worker stopped answering")
        alone = True
        try:
            song = P.SongParams(steps=request.steps, cfg=float(request.cfg), seed=unit.seed,
                                song_duration=p.song_duration, edit_segments=p.edit_segments)
            job = worker.submit(p.tokens, p.style, p.negative_style, cond=p.cond, song=song, label=unit.key,
                                style_match=bool(self.config.models.style))
            unit.handle = job
            if unit.ctx.stopping:  # cancelled between placement and submit
                job.cancel()
            sink.running(unit, slot.name)
            for ev in job.events():
                if ev.op is P.Op.STEP:
                    sink.step(unit, ev.body.k, ev.body.total, ev.body.seconds)
                elif ev.op is P.Op.WINDOW:
                    first = unit.first_sound_at is None
                    sink.window(unit, ev.body.j, ev.body.total, ev.body.seconds, ev.body.start_sample,
                                np.array(ev.tensors["audio"], dtype=np.float32))  # own the buffer
                    if first:  # a sibling held back for this first sound may go now
                        with self._cond:
                            self._cond.notify_all()
                elif ev.op is P.Op.DONE:
                    timings = dict(ev.body.timings)
                    unit.device_memory = dict(ev.body.memory)
                    unit.style_heard = {"embedding": ev.tensors.get("style_embedding"),
                                        "window_s": list(ev.body.style_window), "error": ev.body.style_error}
                    self.device_seconds += sum(timings.get(k, 0.0) for k in ("prepare", "steps", "decode"))
                    outcome = ("done", timings)
                elif ev.op is P.Op.ERROR:
                    outcome = ("error", ev.body.error)
                elif ev.op is P.Op.CANCELLED:
                    outcome = ("cancelled", None)
        except WorkerDeadError as exc:
            outcome = ("lost", str(exc).splitlines()[0])
            self._on_dead(slot, worker, str(exc))
            with self._cond:
                dead, keys = slot.died_with
                alone = dead is not worker or keys <= {unit.key}  # unknown: as before, charged
        except WorkerError as exc:
            outcome = ("error", str(exc))
        except Exception as exc:  # noqa: BLE001 - a relay bug must still end the take
            logger.exception("pool: relaying %s failed", unit.key)
            outcome = ("error", f"{type(exc).__name__}: {exc}")
        finally:
            with self._cond:
                slot.units.pop(unit.key, None)
                if outcome[0] == "done":
                    slot.failures = 0  # a healthy worker earns its backoff back
                self._cond.notify_all()
            unit.handle = None
        kind, value = outcome
        if kind == "done":
            sink.done(unit, {**value, "worker_wait": unit.device_timings.get("worker_wait", 0.0)})
        elif kind == "error":
            sink.error(unit, value)
        elif kind == "cancelled":
            sink.cancelled(unit)
        else:
            sink.lost(unit, f"worker {slot.name} died: {value}", alone=alone)

    # -- one-shot device calls for the input stage (DeviceOps) -----------------------------------
    def _call(self, what: str, fn: Any) -> Any:
        last: Exception | None = None
        for _ in range(2):  # a worker dying under a call: try the next healthy one once
            with self._cond:
                ready = [s for s in self.slots if s.state == "ready"]
                if not ready:
                    # No time limit: a first song's style waits for the model to load, however long it takes.
                    self._cond.wait_for(lambda: self._closed or any(s.state == "ready" for s in self.slots)
                                        or not any(self._coming(s) for s in self.slots))
                    ready = [s for s in self.slots if s.state == "ready"]
                if not ready and self._failure:
                    raise NoWorkerError(self._failure)
                if not ready:
                    raise NoWorkerError(f"no worker is up to run {what}: "
                                        + "; ".join(s.status() for s in self.slots))
                slot = min(ready, key=lambda s: (len(s.units), s.index))
                worker = slot.worker
            try:
                return fn(worker)
            except WorkerDeadError as exc:
                last = exc
                self._on_dead(slot, worker, str(exc))
        raise WorkerDeadError(f"{what}: {last}")

    def embed_text(self, texts: list[str]) -> np.ndarray:
        return _relay(lambda: self._call("a style embedding", lambda w: w.style_text(texts)))

    def embed_audio(self, wavs: np.ndarray) -> np.ndarray:
        return _relay(lambda: self._call("a style embedding", lambda w: w.style_audio(wavs)))

    def encode(self, audio: np.ndarray, seed: int) -> np.ndarray:
        return _relay(lambda: self._call("the reference encode", lambda w: w.encode(audio, seed)[0]))

    def transcribe(self, audio: np.ndarray, windows: list[list[float]], language: str
                   ) -> tuple[str, list[tuple[str, float, float]]]:
        """The lyrics check's hearing (engine.hearing.Transcribe) on the least busy worker."""
        reply = _relay(lambda: self._call("the lyrics check", lambda w: w.transcribe(audio, windows, language)))
        return reply.model, [(w.text, w.start, w.end) for w in reply.words]

    def worker_info(self) -> list[dict[str, Any]]:
        with self._cond:
            return [{"name": s.name, "state": s.state, "variant": s.variant, "jobs": len(s.units), **s.info}
                    for s in self.slots]


class RelayedError(RuntimeError):
    """A worker's "ExceptionName: message", passed on without wrapping it in another name."""

    relayed = True


def _relay(fn: Any) -> Any:
    try:
        return fn()
    except WorkerDeadError:
        raise
    except WorkerError as exc:
        raise RelayedError(str(exc)) from None
