"""Which job's next unit runs: one guided step or one VAE window at a time, under a policy.

Policies (they change when a job finishes, never what it computes):
- `fifo`: the earliest job first, to the end; best throughput for batches.
- `fair`: round robin over the jobs in progress, one unit each per round; a newly arrived job runs its
  first unit at once (it goes to the front of the ring), so a short song submitted behind a long one
  finishes first.
- `share`: processor sharing in rounds; a job that arrives during a round joins from the next round, and
  within a round the older job goes first.

Calls that are not songs (FORWARD for RemoteDiT, ENCODE, STYLE) run before the next job unit, in arrival
order: they are single units and someone is waiting on each. Background calls (TRANSCRIBE: the lyrics
check of a take already made and playable) run when no job has a unit ready, so a take being made is
never slowed by the check of one before it (its ETA climbed 22 -> 50 s while four checks ran ahead of its
steps); one that has waited `BACKGROUND_MAX_WAIT_S` runs next anyway, so a busy worker still checks.

Thread model: the IO thread adds jobs and calls and marks cancels; the compute thread takes units. One
lock guards everything; the compute thread waits on a condition while there is nothing to do.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

POLICIES = ("fifo", "fair", "share")
BACKGROUND_MAX_WAIT_S = 120.0  # well under the caller's 600 s TRANSCRIBE timeout


class JobLimitError(RuntimeError):
    pass


@dataclass(eq=False)
class WorkerJob:
    """A song job the worker holds, from admission to DONE, ERROR or CANCELLED."""

    peer: bytes
    rid: int
    spec: Any  # backends.JobSpec
    seq: int = 0  # admission order
    arrived: float = field(default_factory=time.monotonic)
    handle: Any = None  # backends.JobHandle once prepared
    cancelled: bool = False
    timings: dict[str, float] = field(default_factory=dict)
    label: str = ""
    peak_bytes: int = 0  # the device's peak memory during this job's units (0: the backend cannot tell)
    heard: Any = None  # audio.StyleWindowTap while a take's style window is collected (Submit.style_match)

    @property
    def key(self) -> tuple[bytes, int]:
        return (self.peer, self.rid)


@dataclass(eq=False)
class Call:
    """A one-unit request (FORWARD, ENCODE, STYLE, TRANSCRIBE) with its decoded message."""

    peer: bytes
    rid: int
    msg: Any
    background: bool = False  # runs when no job unit is ready (or after BACKGROUND_MAX_WAIT_S)
    arrived: float = field(default_factory=time.monotonic)


class Scheduler:
    """The jobs and calls the worker holds, and the policy that orders their units."""

    def __init__(self, policy: str = "fair", max_jobs: int = 8) -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown policy {policy!r}; choose one of {POLICIES}")
        self.policy = policy
        self.max_jobs = max_jobs
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._jobs: dict[tuple[bytes, int], WorkerJob] = {}
        self._calls: deque[Call] = deque()
        self._background: deque[Call] = deque()
        self._seq = itertools.count()
        self._ring: deque[WorkerJob] = deque()  # fair: next job at the left
        self._round: deque[WorkerJob] = deque()  # share: jobs still to run in this round
        self._stopping = False
        self.jobs_done = 0

    # ---- IO thread ----------------------------------------------------------------------------------
    def add_job(self, job: WorkerJob) -> int:
        """Admit a job; returns how many jobs were held before it. Raises JobLimitError when full."""
        with self._cond:
            if job.key in self._jobs:
                raise ValueError(f"job {job.rid} is already held for this client")
            if len(self._jobs) >= self.max_jobs:
                raise JobLimitError(f"the worker holds {len(self._jobs)} jobs (cap {self.max_jobs}); "
                                    "wait for one to finish or start the worker with a larger --max-jobs")
            held = len(self._jobs)
            job.seq = next(self._seq)
            self._jobs[job.key] = job
            if self.policy == "fair":
                self._ring.appendleft(job)  # starts at once
            self._cond.notify()
            return held

    def add_call(self, call: Call) -> None:
        with self._cond:
            (self._background if call.background else self._calls).append(call)
            self._cond.notify()

    def cancel(self, peer: bytes, rid: int) -> bool:
        """Mark a job cancelled; the compute thread reaps it before its next unit. False if not held."""
        with self._cond:
            job = self._jobs.get((peer, rid))
            if job is None:
                return False
            job.cancelled = True
            self._cond.notify()
            return True

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._lock:
            return len(self._jobs)

    # ---- compute thread -----------------------------------------------------------------------------
    def next(self, timeout: float) -> tuple[str, Any] | None:
        """The next thing to do: ("reap", job) for a cancelled job, ("call", call), ("job", job) for one
        unit of that job, or None after `timeout` seconds (or at once when stopping) with nothing to do."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for job in self._jobs.values():
                    if job.cancelled:
                        return ("reap", job)
                if self._stopping:
                    return None
                if self._calls:
                    return ("call", self._calls.popleft())
                if self._background and time.monotonic() - self._background[0].arrived >= BACKGROUND_MAX_WAIT_S:
                    return ("call", self._background.popleft())
                job = self._pick()
                if job is not None:
                    return ("job", job)
                if self._background:
                    return ("call", self._background.popleft())
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)

    def unit_done(self, job: WorkerJob) -> None:
        """Move a job that just ran a unit to where the policy wants it next."""
        with self._cond:
            if self.policy == "fair" and self._ring and self._ring[0] is job:
                self._ring.rotate(-1)  # to the back of the ring

    def remove(self, job: WorkerJob, *, finished: bool = False) -> None:
        """Forget a job (done, cancelled or failed); its device state must already be freed."""
        with self._cond:
            self._jobs.pop(job.key, None)
            for q in (self._ring, self._round):
                try:
                    q.remove(job)
                except ValueError:
                    pass
            if finished:
                self.jobs_done += 1

    def drain(self) -> list[WorkerJob]:
        """Remove and return every job held (shutdown)."""
        with self._cond:
            jobs = sorted(self._jobs.values(), key=lambda j: j.seq)
            self._jobs.clear()
            self._ring.clear()
            self._round.clear()
            self._calls.clear()
            self._background.clear()
            return jobs

    def _pick(self) -> WorkerJob | None:
        if not self._jobs:
            return None
        if self.policy == "fifo":
            return min(self._jobs.values(), key=lambda j: j.seq)
        if self.policy == "fair":
            return self._ring[0] if self._ring else None
        # share: a round holds the jobs present when it started, oldest first.
        if not self._round:
            self._round.extend(sorted(self._jobs.values(), key=lambda j: j.seq))
        return self._round.popleft()
