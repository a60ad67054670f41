"""The device stage: a pool of workers, one per device (local subprocesses or remote tcp workers).

Placement: a take goes to the least-loaded ready worker that holds the DiT its duration needs (95 s:
base, 96-285 s: full) and has room (the worker's `max_jobs`, from its handshake), and stays there: its
sampler state lives on that card. If no worker holds the needed DiT, an idle local worker is restarted
with it. When every worker is full, `place` blocks: that is the pipeline's back-pressure.

Failure: a worker that dies or hangs (no heartbeat, or one unit running far too long; detected by
`engine.remote`) loses its takes; each is reported `lost` and the pipeline retries it once. Local workers
are restarted with backoff; remote ones are reconnected with the same backoff. A slot never gives up:
past the end of `restart_backoff_s` it keeps trying at the longest interval ("restarting (N failures):
<reason>"), so a cause that goes away (a card freed, a file put back) brings the worker back. While a
slot is still within its backoff list a take waits for it; once every slot that could run the take is
past the list, the take fails at once with the workers' own reasons instead of waiting blind.

Ray (`EngineConfig.ray`, `engine.ray_workers`): the slots are the cluster's seats, one per accelerator;
a slot's (re)start asks its Ray actor to start the worker on its node instead of spawning a subprocess,
and everything above holds as for a local worker. The monitor polls the cluster every `ray_poll_s`: a
node that joins adds slots, a node that leaves retires its slots (their takes are lost and retried).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

import numpy as np

from device_worker import protocol as P
from engine.config import EngineConfig, WorkerSpec
from engine.remote import Worker, WorkerDeadError, WorkerError
from engine.units import DeviceSink, JobContext, Stopping, Unit

logger = logging.getLogger(__name__)


class NoWorkerError(RuntimeError):
    """No worker can take the job (all dead and out of restarts, or none holds the model it needs)."""


class Slot:
    """One worker seat: its spec, the live client, the takes on it, its health."""

    def __init__(self, index: int, spec: WorkerSpec, variant: str, seat: Any = None):
        self.index, self.spec, self.variant = index, spec, variant
        self.seat = seat  # engine.ray_workers.Seat of a Ray worker, else None
        self.name = f"w{index}:{seat.name if seat is not None else spec.name}"
        self.retired = False  # a Ray seat whose node left: never restarted, dropped once its takes ended
        self.worker: Worker | None = None
        self.units: dict[str, Unit] = {}
        self.state = "new"  # new | starting | ready | dead | restarting | closed
        self.capacity = 1
        self.failures = 0  # consecutive failed starts / deaths, for the backoff
        self.reason = ""  # why the last start failed or the worker died ("ExceptionName: first line")
        self.info: dict[str, Any] = {}

    @property
    def local(self) -> bool:
        """Started by this pool (a subprocess or a Ray actor), so it can be restarted with another DiT."""
        return self.spec.address is None

    def status(self) -> str:
        """One line on this slot for messages: its state, and while it is down, how often and why."""
        if self.state in ("dead", "restarting", "starting") and self.failures:
            return f"{self.name} restarting ({self.failures} failures): {self.reason}"
        return f"{self.name} {self.state} ({self.variant})"


class Pool:
    def __init__(self, config: EngineConfig):
        self.config = config
        self.ray: Any = None  # engine.ray_workers.RayWorkers with config.ray; its seats become slots
        self.slots = [] if config.ray else [Slot(i, spec, config.start_variant)
                                            for i, spec in enumerate(config.workers)]
        self._next_index = len(self.slots)
        self._cond = threading.Condition()
        self._closed = False
        self._failure: str | None = None  # why start() gave up: what takes queued meanwhile fail with
        self.device_seconds = 0.0  # worker-measured compute (prepare + steps + decode) of finished takes
        self._monitor = threading.Thread(target=self._watch, name="pool-monitor", daemon=True)

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self, wait: bool = True) -> Pool:
        """Start every slot's worker; `wait`: block until each is ready or has used up its backoff list
        (NoWorkerError with the workers' reasons when none is ready; the slots are stopped then)."""
        if self.config.ray:
            from engine.ray_workers import RayWorkers, default_resource

            spec = self.config.workers[0]
            self.ray = RayWorkers(self.config.ray, self.config.ray_resource or default_resource(spec.backend, spec.device),
                                  threads=spec.threads, env=self.config.worker_env or None)
            if not self._reconcile():
                self.close()
                raise NoWorkerError(f"the Ray cluster has no {self.ray.resource} resource on a live node "
                                    "(one worker per unit of it)")
        else:
            for s in self.slots:
                threading.Thread(target=self._boot, args=(s, s.variant), daemon=True).start()
        if wait:
            with self._cond:
                self._cond.wait_for(lambda: self._closed or all(s.state == "ready" or self._exhausted(s)
                                                                for s in self.slots))
            if not any(s.state == "ready" for s in self.slots):
                errors = "; ".join(f"{s.name}: {s.reason or s.state}" for s in self.slots)
                with self._cond:
                    self._failure = f"no worker started: {errors}"
                self.close()
                raise NoWorkerError(self._failure)
        self._monitor.start()
        return self

    def _reconcile(self) -> int:
        """Ray: a slot for every seat of the cluster that has none, retire the slots of seats that are gone
        (their node left); returns the number of live Ray slots."""
        seats = set(self.ray.seats())  # a cluster call: outside the lock
        gone, added = [], []
        with self._cond:
            if self._closed:
                return 0
            have = {s.seat for s in self.slots if not s.retired}
            for slot in self.slots:
                if not slot.retired and slot.seat not in seats:
                    slot.retired, slot.state = True, "closed"
                    slot.info["status"] = f"{slot.name} left the cluster"
                    gone.append(slot)
            for seat in sorted(seats - have, key=lambda t: (t.node_ip, t.node_id, t.k)):
                slot = Slot(self._next_index, self.config.workers[0], self.config.start_variant, seat=seat)
                self._next_index += 1
                self.slots.append(slot)
                added.append(slot)
            # A retired slot stays listed until its takes have ended (they are lost and retried elsewhere).
            drop = [s for s in self.slots if s.retired and not s.units]
            self.slots = [s for s in self.slots if s not in drop]
            self._cond.notify_all()
        for slot in gone:
            logger.warning("pool: %s left the cluster; %d take(s) on it will be retried", slot.name, len(slot.units))
        for slot in drop:
            worker, slot.worker = slot.worker, None
            if worker is not None:
                threading.Thread(target=worker.close, daemon=True).start()
        if gone:
            self.ray.release(*(s.seat for s in gone))
        for slot in added:
            logger.info("pool: %s joined", slot.name)
            threading.Thread(target=self._boot, args=(slot, slot.variant), name=f"pool-boot-{slot.index}",
                             daemon=True).start()
        return len(seats)

    def _options(self, slot: Slot, variant: str) -> dict[str, Any]:
        """A started worker's configuration (device_worker.config.WorkerConfig's fields)."""
        cfg, spec, models = self.config, slot.spec, self.config.models
        return dict(dit=models.dit(variant), vae=models.vae, backend=spec.backend, device=spec.device,
                    policy=cfg.policy, precision=spec.precision, compile=spec.compile, max_jobs=cfg.worker_max_jobs,
                    threads=spec.threads, lock_dir=cfg.lock_dir, style=models.style,
                    lyrics_model=models.lyrics if cfg.lyrics_check else None)

    def _make_worker(self, slot: Slot, variant: str) -> Worker:
        cfg, spec = self.config, slot.spec
        common: dict[str, Any] = dict(heartbeat_s=cfg.heartbeat_s, dead_after_s=cfg.dead_after_s)
        if slot.seat is not None:  # Ray: the seat's actor starts the worker on its node
            address = self.ray.start(slot.seat, self._options(slot, variant))
            return Worker(connect=address, secret=self.ray.secret, **common)
        if spec.address is not None:
            return Worker(connect=spec.address, secret_file=spec.secret_file, **common)
        return Worker(python=spec.python, secret_file=spec.secret_file, **self._options(slot, variant),
                      env=({**os.environ, **cfg.worker_env} if cfg.worker_env else None), **common)

    def _exhausted(self, slot: Slot) -> bool:
        """Past the end of the backoff list: the slot keeps trying, at the longest interval."""
        return slot.failures > len(self.config.restart_backoff_s)

    def _delay(self, slot: Slot) -> float:
        delays = self.config.restart_backoff_s or (1.0,)
        return delays[min(slot.failures, len(delays) - 1)]

    def _boot(self, slot: Slot, variant: str) -> None:
        """Start (or reconnect) `slot`'s worker; on failure retry with backoff, and past the end of the
        backoff list at its longest delay, until it starts or the pool closes. Never gives up."""
        while True:
            with self._cond:
                if self._closed or slot.retired:
                    return
                slot.state = "starting"
            worker = None
            try:
                worker = self._make_worker(slot, variant).start()
                ready = worker.wait_ready(self.config.ready_timeout_s)
                welcome = worker.welcome
                with self._cond:
                    if self._closed or slot.retired:
                        raise RuntimeError("pool closed" if self._closed else "the worker's node left the cluster")
                    slot.worker, slot.variant, slot.state = worker, variant, "ready"
                    slot.capacity = welcome.limits.max_jobs if welcome else 1
                    # `failures` stays until a take finishes: a worker that starts but dies under every
                    # take keeps its long backoff; the reason is shown only while it is down.
                    slot.info = {"name": slot.name, "variant": variant, "load_s": ready.load_s,
                                 "models": dict(ready.models), **dict(ready.info),
                                 **({"backend": welcome.backend, "device": welcome.device,
                                     "precision": welcome.precision, "policy": welcome.policy,
                                     "pid": welcome.pid} if welcome else {})}
                    self._cond.notify_all()
                logger.info("pool: %s ready (%s DiT, %d jobs max)", slot.name, variant, slot.capacity)
                return
            except Exception as exc:  # noqa: BLE001 - any start failure: back off and try again
                if worker is not None:
                    worker.close()
                with self._cond:
                    if self._closed or slot.retired:
                        slot.state = "closed"
                        self._cond.notify_all()
                        return
                    delay = self._delay(slot)
                    slot.failures += 1
                    slot.reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                    slot.state = "restarting" if self._exhausted(slot) else "dead"
                    slot.info["error"] = slot.reason
                    slot.info["status"] = slot.status()
                    self._cond.notify_all()
                logger.warning("pool: %s failed to start (%s); retry in %.1f s", slot.name, slot.status(), delay)
                if self._sleep(delay):
                    return

    def _sleep(self, seconds: float) -> bool:
        """Wait out a backoff delay; True when the pool closed meanwhile (stop at once)."""
        with self._cond:
            return self._cond.wait_for(lambda: self._closed, seconds)

    def _on_dead(self, slot: Slot, worker: Worker, reason: str) -> None:
        """The worker behind `slot` is gone: reap it and start a fresh one after a backoff delay."""
        with self._cond:
            if slot.worker is not worker or slot.state != "ready":
                return  # already handled
            delay = self._delay(slot)
            slot.failures += 1
            slot.reason = reason.splitlines()[0] if reason else "the worker died"
            slot.state = "restarting" if self._exhausted(slot) else "dead"
            slot.worker = None
            slot.info["error"] = slot.reason
            slot.info["status"] = slot.status()
            self._cond.notify_all()
        logger.error("pool: %s died: %s; restarting in %.1f s", slot.name, slot.status(), delay)

        def restart() -> None:
            worker.close(timeout_s=4)  # a hung process is terminated, then killed
            if not self._sleep(delay):
                self._boot(slot, slot.variant)

        threading.Thread(target=restart, name=f"pool-restart-{slot.index}", daemon=True).start()

    def _watch(self) -> None:
        """Notice idle workers dying too (busy ones are noticed by their takes' event threads); with Ray,
        nodes joining and leaving."""
        polled = time.monotonic()
        while not self._closed:
            time.sleep(self.config.heartbeat_s)
            if self.ray is not None and time.monotonic() - polled >= self.config.ray_poll_s:
                polled = time.monotonic()
                try:
                    self._reconcile()
                except Exception as exc:  # noqa: BLE001 - the cluster's head unreachable: try again later
                    logger.warning("pool: the Ray cluster did not answer: %s", exc)
            for slot in list(self.slots):
                worker = slot.worker
                if worker is not None and slot.state == "ready":
                    try:
                        worker.ensure_alive()
                    except WorkerDeadError as exc:
                        self._on_dead(slot, worker, str(exc))

    def close(self) -> None:
        with self._cond:
            self._closed = True
            workers = [s.worker for s in self.slots if s.worker is not None]
            for s in self.slots:
                s.state, s.worker = "closed", None
            self._cond.notify_all()
        for w in workers:
            w.close()
        if self.ray is not None:
            self.ray.close()

    # -- placement (DeviceStage) ------------------------------------------------------------------
    def place(self, unit: Unit, sink: DeviceSink) -> None:
        variant = unit.ctx.request.model_variant
        t0 = time.perf_counter()
        with self._cond:
            while True:
                if self._failure:  # takes queued while the workers started fail with the workers' reason
                    raise NoWorkerError(self._failure)
                if self._closed:
                    raise RuntimeError("the engine is shutting down")
                if unit.ctx.stopping:
                    raise Stopping
                slot = self._choose(variant)
                if slot is not None:
                    break
                self._cond.wait(0.25)
            slot.units[unit.key] = unit
            worker = slot.worker
        unit.device_timings["worker_wait"] = round(time.perf_counter() - t0, 6)
        threading.Thread(target=self._run, args=(slot, worker, unit, sink), name=f"take-{unit.key}",
                         daemon=True).start()

    @staticmethod
    def _coming(slot: Slot) -> bool:
        """Worth waiting for: starting now, or down but still within its backoff list ("dead"); a slot
        past the list ("restarting", between its long-interval tries) is not."""
        return slot.state in ("new", "starting", "dead")

    def _choose(self, variant: str) -> Slot | None:
        """Least-loaded ready worker with the right DiT and room; else switch an idle one; else None
        (wait); NoWorkerError, naming each worker's state and reason, when none can come for it."""
        ready = [s for s in self.slots if s.state == "ready" and s.variant == variant]
        roomy = [s for s in ready if len(s.units) < s.capacity]
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
        try:
            job = worker.submit(p.tokens, p.style, p.negative_style, cond=p.cond, steps=request.steps,
                                cfg_strength=float(request.cfg), seed=unit.seed, song_duration=p.song_duration,
                                edit_segments=p.edit_segments, label=unit.key)
            unit.handle = job
            if unit.ctx.stopping:  # cancelled between placement and submit
                job.cancel()
            sink.running(unit, slot.name)
            for ev in job.events():
                if ev.op is P.Op.STEP:
                    sink.step(unit, ev.body.k, ev.body.total, ev.body.seconds)
                elif ev.op is P.Op.WINDOW:
                    sink.window(unit, ev.body.j, ev.body.total, ev.body.seconds, ev.body.start_sample,
                                np.array(ev.tensors["audio"], dtype=np.float32))  # own the buffer
                elif ev.op is P.Op.DONE:
                    timings = dict(ev.body.timings)
                    unit.device_memory = dict(ev.body.memory)
                    self.device_seconds += sum(timings.get(k, 0.0) for k in ("prepare", "steps", "decode"))
                    outcome = ("done", timings)
                elif ev.op is P.Op.ERROR:
                    outcome = ("error", ev.body.error)
                elif ev.op is P.Op.CANCELLED:
                    outcome = ("cancelled", None)
        except WorkerDeadError as exc:
            outcome = ("lost", str(exc).splitlines()[0])
            self._on_dead(slot, worker, str(exc))
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
            sink.lost(unit, f"worker {slot.name} died: {value}")

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
