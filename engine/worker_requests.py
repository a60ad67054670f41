"""What a request to the device worker gives back: its events, the job in flight, a song's result, errors.

`engine.worker_client.Worker` makes a `RemoteJob` per request and its IO thread fills the job's `inbox`;
the caller, on any thread, iterates `events()` with deadlines or takes the single `reply()` of a call.
No sockets and no torch here.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from device_worker import protocol as P

TERMINAL = (P.Op.DONE, P.Op.ERROR, P.Op.CANCELLED)


class WorkerError(RuntimeError):
    """The worker refused or failed one request ("ExceptionName: message" from the worker)."""


class WorkerDeadError(WorkerError):
    """The worker process is gone or stopped answering; every call fails until a new Worker is started."""


@dataclass
class WorkerEvent:
    """One message from the worker for a request: `op` (protocol.Op), typed `body`, numpy `tensors`."""

    op: P.Op
    body: Any
    tensors: dict[str, Any] = field(default_factory=dict)
    received: float = field(default_factory=time.monotonic)  # when the client's IO thread got it

    @property
    def kind(self) -> str:
        return self.op.name.lower()


class Dead:
    """The sentinel the client puts in every waiting queue once the worker is dead."""

    def __init__(self, error: WorkerDeadError) -> None:
        self.error = error


class Client(Protocol):
    """What a job needs of the worker's client (`engine.worker_client.Worker`)."""

    def ensure_alive(self) -> None: ...

    def forget(self, rid: int) -> None: ...

    def cancel(self, rid: int) -> None: ...


class RemoteJob:
    """A request in flight: a song job (SUBMIT/DECODE) or a call. Iterate `events()`; `cancel()` any time."""

    def __init__(self, worker: Client, rid: int) -> None:
        self.worker = worker
        self.rid = rid
        self.inbox: queue.Queue[WorkerEvent | Dead] = queue.Queue()  # filled by the client's IO thread
        self.finished = False

    def next_event(self, timeout_s: float | None = None) -> WorkerEvent:
        """The next event; TimeoutError after `timeout_s`, WorkerDeadError when the worker died."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            wait = 0.25 if deadline is None else min(0.25, deadline - time.monotonic())
            if wait <= 0:
                raise TimeoutError(f"no event for request {self.rid} within {timeout_s} s")
            try:
                item = self.inbox.get(timeout=wait)
            except queue.Empty:
                self.worker.ensure_alive()
                continue
            if isinstance(item, Dead):
                self.inbox.put(item)  # every later call sees it too
                raise item.error
            if item.op in TERMINAL:
                self.finished = True
                self.worker.forget(self.rid)
            return item

    def events(self, timeout_s: float | None = None, event_timeout_s: float | None = None) -> Iterator[WorkerEvent]:
        """Events until DONE, ERROR or CANCELLED (included). `timeout_s` bounds the whole job,
        `event_timeout_s` the gap between two events (a queued job under `fifo` may wait long)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not self.finished:
            left = None if deadline is None else deadline - time.monotonic()
            step = event_timeout_s if left is None else (left if event_timeout_s is None else min(left, event_timeout_s))
            yield self.next_event(step)

    def cancel(self) -> None:
        if not self.finished:
            self.worker.cancel(self.rid)

    def reply(self, timeout_s: float | None = 60.0) -> WorkerEvent:
        """For calls: the single reply; an ERROR becomes WorkerError."""
        ev = self.next_event(timeout_s)
        self.finished = True
        self.worker.forget(self.rid)
        if ev.op is P.Op.ERROR:
            raise WorkerError(ev.body.error)
        return ev


@dataclass
class SongResult:
    latent: np.ndarray | None  # [N, 64] (None for a decode-only job)
    audio: np.ndarray  # float32 [2, n], the windows concatenated
    timings: dict[str, float]
    events: list[WorkerEvent]


def collect(job: RemoteJob, timeout_s: float | None = 600.0) -> SongResult:
    """Run a job to the end: the latent, the audio windows joined, the timings. Raises WorkerError on
    ERROR or CANCELLED."""
    latent, blocks, evs = None, [], []
    for ev in job.events(timeout_s):
        evs.append(ev)
        if ev.op is P.Op.LATENT:
            latent = ev.tensors["latent"]
        elif ev.op is P.Op.WINDOW:
            blocks.append(ev.tensors["audio"])
        elif ev.op is P.Op.ERROR:
            raise WorkerError(ev.body.error)
        elif ev.op is P.Op.CANCELLED:
            raise WorkerError(f"Cancelled: job {job.rid} was cancelled during {ev.body.stage}")
        elif ev.op is P.Op.DONE:
            audio = np.concatenate(blocks, axis=1) if blocks else np.zeros((2, 0), np.float32)
            return SongResult(latent, audio, dict(ev.body.timings), evs)
    raise WorkerError(f"job {job.rid} ended without DONE")
