"""How long a worker may stay silent before it counts as dead: a budget from measured latency.

A fixed `dead_after_s` fails on a loaded host: when other work holds the CPUs, the worker's answers
and this process's own IO thread are both late, and gaps of 6.0-6.4 s were seen against a 6 s budget
(issue 27, finding 10), each a false death that cost its takes a retry and the slot a restart. The
budget here is the configured floor or a multiple of the longest silence measured recently between
two messages heard from this worker, whichever is larger, capped at `CAP_FACTOR` times the floor, so
a truly dead or hung worker is still found (a local process that exits is seen at once anyway).
"""

from __future__ import annotations

import collections

HEADROOM = 3.0  # the budget: this many times the longest recent silence
CAP_FACTOR = 10.0  # never more than this many times the configured floor
WINDOW = 120  # silences remembered (at one heartbeat a second: the last two minutes)


class SilenceBudget:
    def __init__(self, floor_s: float) -> None:
        self.floor_s = floor_s
        self.last_heard = 0.0  # monotonic time of the last message; 0 until the first
        self._silences: collections.deque[float] = collections.deque(maxlen=WINDOW)

    def heard(self, now: float) -> None:
        if self.last_heard:
            self._silences.append(now - self.last_heard)
        self.last_heard = now

    def budget_s(self) -> float:
        worst = max(self._silences, default=0.0)
        return min(max(self.floor_s, HEADROOM * worst), CAP_FACTOR * self.floor_s)

    def overdue(self, now: float) -> float | None:
        """Seconds of silence when past the budget, else None (also before anything was heard)."""
        silent = now - self.last_heard
        return silent if self.last_heard and silent > self.budget_s() else None
