"""Requests in flight on the engine side: events, `RemoteJob` (iterate, cancel), results, `RemoteVae`.

Split from `engine.remote` (which re-exports everything here). No torch at import time.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from device_worker import protocol as P
from device_worker import wire

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


class _Dead:
    def __init__(self, error: WorkerDeadError) -> None:
        self.error = error


class RemoteJob:
    """A request in flight: a song job (SUBMIT/DECODE) or a call. Iterate `events()`; `cancel()` any time."""

    def __init__(self, worker: Any, rid: int) -> None:
        self.worker = worker
        self.rid = rid
        self._q: queue.Queue[WorkerEvent | _Dead] = queue.Queue()
        self.finished = False

    def next_event(self, timeout_s: float | None = None) -> WorkerEvent:
        """The next event; TimeoutError after `timeout_s`, WorkerDeadError when the worker died."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            wait = 0.25 if deadline is None else min(0.25, deadline - time.monotonic())
            if wait <= 0:
                raise TimeoutError(f"no event for request {self.rid} within {timeout_s} s")
            try:
                item = self._q.get(timeout=wait)
            except queue.Empty:
                self.worker.ensure_alive()
                continue
            if isinstance(item, _Dead):
                self._q.put(item)  # every later call sees it too
                raise item.error
            if item.op in TERMINAL:
                self.finished = True
                self.worker._forget(self.rid)
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
            self.worker._send(P.Cancel(self.rid), next(self.worker._rids))

    def reply(self, timeout_s: float | None = 60.0) -> WorkerEvent:
        """For calls: the single reply; an ERROR becomes WorkerError."""
        ev = self.next_event(timeout_s)
        self.finished = True
        self.worker._forget(self.rid)
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


def _host(t: Any) -> Any:
    """A torch tensor (without importing torch) or array-like -> numpy (bfloat16 as wire.BF16 bits)."""
    if hasattr(t, "detach"):
        t = t.detach().cpu().contiguous()
        if str(t.dtype) == "torch.bfloat16":
            import torch

            return wire.BF16(t.view(torch.int16).numpy().view(np.uint16))
        return t.numpy()
    return t if isinstance(t, (np.ndarray, wire.BF16)) else np.asarray(t)


class RemoteVae:
    """The worker's VAE as an object: `.decode(latent_bcn [B, 64, T])` -> audio [B, 2, T * 2048], decoded
    window by window on the worker (torch in -> torch out, numpy in -> numpy out)."""

    def __init__(self, worker: Any, window: int = 128, overlap: int = 32, timeout_s: float = 600.0) -> None:
        self.worker, self.window, self.overlap, self.timeout_s = worker, window, overlap, timeout_s

    def decode(self, latent_bcn: Any) -> Any:
        lat = _host(latent_bcn)
        if lat.ndim != 3:
            raise ValueError(f"decode takes [B, 64, T], got shape {tuple(lat.shape)}")
        jobs = [self.worker.decode(lat[b], self.window, self.overlap) for b in range(lat.shape[0])]
        out = np.stack([collect(j, self.timeout_s).audio for j in jobs])
        if hasattr(latent_bcn, "detach"):
            import torch

            return torch.from_numpy(out).to(latent_bcn.device)
        return out
