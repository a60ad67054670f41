"""Worker slots and their restarts: one seat per device, its live client, its health and backoff.

A slot's worker comes from a source of slots: local (`LocalSource`: a subprocess per configured
`WorkerSpec`, or a tcp worker reconnected at its address) or Ray (`engine.ray_slots.RaySource`: one seat
per accelerator of the cluster, started by the seat's actor on its node). Everything below holds for
both.

Failure: a worker that dies or hangs (no heartbeat, or one unit running far too long; detected by
`engine.worker_client`) loses its takes (the pool reports them `lost`). Local workers are restarted with
backoff; remote ones are reconnected with the same backoff. A slot never gives up: past the end of
`restart_backoff_s` it keeps trying at the longest interval ("restarting (N failures): <reason>"), so a
cause that goes away (a card freed, a file put back) brings the worker back.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, Protocol

from engine.config import EngineConfig, WorkerSpec
from engine.units import Unit
from engine.worker_client import Worker, WorkerDeadError

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
        # The takes that were on the worker when it died (their keys), with that worker: whether a lost
        # take was alone on it decides whether the loss is charged to it (see Pool._run).
        self.died_with: tuple[Worker | None, frozenset[str]] = (None, frozenset())

    @property
    def local(self) -> bool:
        """Started by this pool (a subprocess or a Ray actor), so it can be restarted with another DiT."""
        return self.spec.address is None

    def status(self) -> str:
        """One line on this slot for messages: its state, and while it is down, how often and why."""
        if self.state in ("dead", "restarting", "starting") and self.failures:
            return f"{self.name} restarting ({self.failures} failures): {self.reason}"
        return f"{self.name} {self.state} ({self.variant})"


class SlotSource(Protocol):
    """Where slots and their workers come from."""

    def open(self, slots: Slots) -> None: ...
    def make_worker(self, slot: Slot, options: dict[str, Any], common: dict[str, Any]) -> Worker: ...
    def poll(self, slots: Slots) -> None: ...
    def close(self) -> None: ...


class LocalSource:
    """The configured workers: subprocesses this pool spawns, or tcp workers it connects to."""

    def __init__(self, config: EngineConfig) -> None:
        self.config = config

    def open(self, slots: Slots) -> None:
        with slots._cond:
            slots.slots = [Slot(i, spec, self.config.start_variant) for i, spec in enumerate(self.config.workers)]
        for s in slots.slots:
            threading.Thread(target=slots._boot, args=(s, s.variant), daemon=True).start()

    def make_worker(self, slot: Slot, options: dict[str, Any], common: dict[str, Any]) -> Worker:
        spec, env = slot.spec, self.config.worker_env
        if spec.address is not None:
            return Worker(connect=spec.address, secret_file=spec.secret_file, **common)
        return Worker(python=spec.python, secret_file=spec.secret_file, in_process=spec.in_process, **options,
                      env=({**os.environ, **env} if env else None), **common)

    def poll(self, slots: Slots) -> None:
        pass

    def close(self) -> None:
        pass


class Slots:
    """The pool's seats and their lifecycle: start, restart with backoff, watch, close."""

    def __init__(self, config: EngineConfig, source: SlotSource):
        self.config = config
        self.source = source  # where workers come from: LocalSource, or engine.ray_slots.RaySource
        self.slots: list[Slot] = []
        self._cond = threading.Condition()
        self._closed = False
        self._failure: str | None = None  # why start() gave up: what takes queued meanwhile fail with
        self._opened = False  # the source has put its slots in place (takes placed before then wait)
        self._monitor = threading.Thread(target=self._watch, name="pool-monitor", daemon=True)

    @property
    def ray(self) -> Any:
        """engine.ray_workers.RayWorkers with config.ray, else None."""
        return getattr(self.source, "ray", None)

    def start(self, wait: bool = True) -> Slots:
        """Start every slot's worker; `wait`: block until each is ready or has used up its backoff list
        (NoWorkerError with the workers' reasons when none is ready; the slots are stopped then)."""
        try:
            self.source.open(self)
        except NoWorkerError as exc:
            with self._cond:
                self._failure = str(exc)
            self.close()
            raise
        with self._cond:
            self._opened = True
            self._cond.notify_all()
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

    def _options(self, slot: Slot, variant: str) -> dict[str, Any]:
        """A started worker's configuration (device_worker.config.WorkerConfig's fields)."""
        config, spec, models = self.config, slot.spec, self.config.models
        return dict(dit=models.dit(variant), vae=models.vae, backend=spec.backend, device=spec.device,
                    policy=config.policy, precision=spec.precision, compile=spec.compile,
                    max_jobs=config.worker_max_jobs, threads=spec.threads, lock_dir=config.lock_dir,
                    style=models.style, lyrics_model=models.lyrics if config.lyrics_check else None)

    def _make_worker(self, slot: Slot, variant: str) -> Worker:
        common: dict[str, Any] = dict(heartbeat_s=self.config.heartbeat_s, dead_after_s=self.config.dead_after_s)
        return self.source.make_worker(slot, self._options(slot, variant), common)

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
        """The worker behind `slot` is gone: note which takes were on it, reap it and start a fresh one
        after a backoff delay."""
        with self._cond:
            if slot.worker is not worker or slot.state != "ready":
                return  # already handled
            slot.died_with = (worker, frozenset(slot.units))
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
        """Notice idle workers dying too (busy ones are noticed by their takes' event threads); let the
        source look for seats that came or went (Ray nodes joining and leaving)."""
        while not self._closed:
            time.sleep(self.config.heartbeat_s)
            self.source.poll(self)
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
        self.source.close()
