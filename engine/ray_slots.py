"""Ray as a source of slots: one per accelerator seat of the cluster (`engine.ray_workers`).

A slot's (re)start asks its seat's Ray actor to start the worker on its node instead of spawning a
subprocess; everything in `engine.slots` holds as for a local worker. `poll` (every `ray_poll_s`, from
the pool's monitor) reconciles the slots with the cluster: a node that joins adds slots, a node that
leaves retires its slots (their takes are lost and retried).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from engine.config import EngineConfig
from engine.slots import NoWorkerError, Slot, Slots
from engine.worker_client import Worker

logger = logging.getLogger(__name__)


class RaySource:
    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        self.ray: Any = None  # engine.ray_workers.RayWorkers once opened
        self._next_index = 0
        self._polled = time.monotonic()

    def open(self, slots: Slots) -> None:
        from engine.ray_workers import RayWorkers, default_resource

        spec = self.config.workers[0]
        self.ray = RayWorkers(self.config.ray, self.config.ray_resource or default_resource(spec.backend, spec.device),
                              threads=spec.threads, env=self.config.worker_env or None)
        if not self.reconcile(slots):
            raise NoWorkerError(f"the Ray cluster has no {self.ray.resource} resource on a live node "
                                "(one worker per unit of it)")

    def make_worker(self, slot: Slot, options: dict[str, Any], common: dict[str, Any]) -> Worker:
        address = self.ray.start(slot.seat, options)  # the seat's actor starts the worker on its node
        return Worker(connect=address, secret=self.ray.secret, **common)

    def poll(self, slots: Slots) -> None:
        if time.monotonic() - self._polled < self.config.ray_poll_s:
            return
        self._polled = time.monotonic()
        try:
            self.reconcile(slots)
        except Exception as exc:  # noqa: BLE001 - the cluster's head unreachable: try again later
            logger.warning("pool: the Ray cluster did not answer: %s", exc)

    def reconcile(self, slots: Slots) -> int:
        """A slot for every seat of the cluster that has none, retire the slots of seats that are gone
        (their node left); returns the number of live Ray slots."""
        seats = set(self.ray.seats())  # a cluster call: outside the lock
        gone, added = [], []
        with slots._cond:
            if slots._closed:
                return 0
            have = {s.seat for s in slots.slots if not s.retired}
            for slot in slots.slots:
                if not slot.retired and slot.seat not in seats:
                    slot.retired, slot.state = True, "closed"
                    slot.info["status"] = f"{slot.name} left the cluster"
                    gone.append(slot)
            for seat in sorted(seats - have, key=lambda t: (t.node_ip, t.node_id, t.k)):
                slot = Slot(self._next_index, self.config.workers[0], self.config.start_variant, seat=seat)
                self._next_index += 1
                slots.slots.append(slot)
                added.append(slot)
            # A retired slot stays listed until its takes have ended (they are lost and retried elsewhere).
            drop = [s for s in slots.slots if s.retired and not s.units]
            slots.slots = [s for s in slots.slots if s not in drop]
            slots._cond.notify_all()
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
            threading.Thread(target=slots._boot, args=(slot, slot.variant), name=f"pool-boot-{slot.index}",
                             daemon=True).start()
        return len(seats)

    def close(self) -> None:
        if self.ray is not None:
            self.ray.close()
