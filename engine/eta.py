"""The ETA model, in one place: how long a take has left, and how long a waiting take will wait.

`TakeEta` is one take's own clock (its measured step and window times, the figure shown steadied);
`wait_etas` are the waiting takes' times until a slot frees for it and its own run; `EtaBoard` is what the
pipeline keeps across takes (the window and take times measured so far, how many windows a length
decodes in, the takes in flight) and asks for every `Step`, `Decoding` and `Queued` figure.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from device_worker.shapes import plan_windows

WAIT_ETA_EVERY_S = 2.0  # how often waiting jobs hear a fresh ETA while takes step


@dataclass
class TakeEta:
    """Time left for one take from its own measured step and window times.

    Per-step time is measured on the worker between this take's consecutive events, so it already holds
    whatever the scheduling policy interleaves. Decoding is counted from the first step, so the figure
    runs down across diffusion and decode without a jump: `windows` is the planned window count, and a
    window's time is this take's own once measured, else `window_s_hint` (earlier takes on the same
    engine), else the step time times `window_ratio` (a window costs about what a step costs, until
    one was measured).
    """

    steps: int
    windows: int
    step_s: float | None = None
    window_s: float | None = None
    steps_done: int = 0
    windows_done: int = 0
    window_ratio: float = 1.0
    _last: float | None = None
    shown_s: float | None = None  # the steadied figure last published (steady)
    _shown_at: float | None = None

    def started(self, now: float | None = None) -> None:
        """The take went to its worker: its first step is timed from here on the wall clock too. Timed by
        the worker's own compute time alone, the first step left out the units of the takes sharing the
        worker, the figure began low and climbed for steps as the average caught up (22 -> 50 s)."""
        if self._last is None:
            self._last = time.monotonic() if now is None else now

    def on_step(self, k: int, measured_s: float | None, now: float | None = None) -> float:
        interval = self._interval(now, measured_s)
        self.step_s = _ema(self.step_s, interval)
        self.steps_done = k
        return interval

    def on_window(self, j: int, measured_s: float | None, now: float | None = None) -> float:
        interval = self._interval(now, measured_s)
        self.window_s = _ema(self.window_s, interval)
        self.windows_done = j
        return interval

    def _interval(self, now: float | None, measured_s: float | None) -> float:
        now = time.monotonic() if now is None else now
        # Wall time between this take's events when we have a previous one (it includes the time other
        # jobs held the card, which is what the musician waits for); else what the worker measured.
        interval = now - self._last if self._last is not None else (measured_s or 0.0)
        self._last = now
        return interval

    def steady(self, raw: float | None, now: float | None = None) -> float | None:
        """What the musician is shown: the last shown figure, run down by the time since, moved a third of
        the way to the new estimate (a sixth when the estimate is later). When siblings start sharing the card
        (or stop), the estimate changes at once; shown raw it jumped (28 s -> 63 s, 1.9 min -> 19 s in the
        walk); steadied it glides."""
        now = time.monotonic() if now is None else now
        if raw is None:
            return self.shown_s
        if self.shown_s is None or self._shown_at is None:
            self.shown_s = raw
        else:
            ran_down = max(self.shown_s - (now - self._shown_at), 0.0)
            self.shown_s = ran_down + (STEADY if raw <= ran_down else RISE) * (raw - ran_down)
        self._shown_at = now
        return self.shown_s

    def eta(self, window_s_hint: float | None = None) -> float | None:
        if self.step_s is None:
            return None
        window_s = next(w for w in (self.window_s, window_s_hint, self.step_s * self.window_ratio) if w is not None)
        left = (self.steps - self.steps_done) * self.step_s + (self.windows - self.windows_done) * window_s
        return max(left, 0.0)


STEADY = 1 / 3  # how far a shown ETA moves toward a new estimate per event
# ...and toward a later one: a figure that climbs is what a musician notices (CI's loaded machine showed
# 19 s -> 24 s when a freed slot started another take beside this one); a slower pace still shows in ~10 events.
RISE = 1 / 6


def _ema(old: float | None, new: float, alpha: float = 0.3) -> float:
    return new if old is None else (1 - alpha) * old + alpha * new


def wait_etas(ahead: int, n: int, steps: int, flight: Sequence[Timed], max_ready: int, *, windows: int,
              window_s_hint: float | None, take_s_hint: float | None) -> tuple[float | None, ...]:
    """Times until each of `n` waiting takes is done (the k-th has `ahead + k` takes in front of it): until a
    slot frees for it, then its own run.

    Each take in flight holds a slot until its own ETA; a take runs its `steps` - 1 updates and `windows`
    windows at the pace the takes in flight have now (`run`). The line is played out: each take in turn
    gets the slot that frees first and holds it for `run`, so a take further back never reads sooner than
    one before it (the closed form `left[ahead % F] + (ahead // F + 1) * run` did, whenever the slots'
    ETAs spread wider than one run: next in line 15 s, takes behind it 3-5 s). Before any take in flight
    was timed, waves of `max_ready` takes of `take_s_hint` each stand in. None until something was timed."""
    left = sorted(e for u in flight if u.eta is not None and (e := u.eta.eta(window_s_hint)) is not None)
    paces = sorted(u.eta.step_s for u in flight if u.eta is not None and u.eta.step_s is not None)
    if left and paces:
        # A take in flight not yet timed (a variation held for its sibling's first sound) frees no slot
        # before the timed ones: the waiting takes share the timed slots.
        step_s = paces[len(paces) // 2]
        run = max(steps - 1, 1) * step_s + windows * (window_s_hint or step_s)
        frees = list(left)  # a heap of the times the slots free
        done: list[float] = []
        for _ in range(ahead + n):
            end = heapq.heappop(frees) + run
            heapq.heappush(frees, end)
            done.append(end)
        return tuple(done[ahead:])
    if take_s_hint is None:
        return (None,) * n
    return tuple((a // max_ready + 2) * take_s_hint for a in range(ahead, ahead + n))


class Timed(Protocol):
    """A take in flight as `wait_etas` sees it (`engine.units.Unit`)."""

    eta: TakeEta | None


class EtaBoard:
    """What the pipeline knows about time across takes; every figure it publishes comes from here."""

    def __init__(self, max_ready: int) -> None:
        self.max_ready = max_ready
        self.window_s_hint: float | None = None  # measured decode window time, for ETAs of later takes
        self.take_s_hint: float | None = None  # wall time of a take from admission to its audio, for waiting ETAs
        self.windows_for: dict[int, int] = {}  # frames -> decode windows the workers used (plan until seen)
        self.flight: dict[int, Timed] = {}  # takes past admission (by id), for the waiting takes' ETA
        self._sent = 0.0  # when the waiting jobs last heard a fresh ETA

    def new_take(self, frames: int, steps: int) -> TakeEta:
        """A take's ETA model before its first event: its updates and its decode windows (as the worker
        decoded this length before, else upstream's window plan), so decoding counts from the start."""
        windows = self.windows_for.get(frames) or (len(plan_windows(frames)) if frames > 0 else 0)
        return TakeEta(steps=max(steps - 1, 1), windows=windows)

    def shown(self, eta: TakeEta) -> float | None:
        return eta.steady(eta.eta(self.window_s_hint))

    def step(self, eta: TakeEta, k: int, total: int, seconds: float) -> float | None:
        eta.steps = total
        eta.on_step(k, seconds)
        return self.shown(eta)

    def window(self, eta: TakeEta, frames: int | None, j: int, total: int, seconds: float) -> float | None:
        eta.windows = total
        if frames is not None:
            self.windows_for[frames] = total
        if eta.window_s is None:  # the first window's interval holds the decoder's start: smooth it in
            eta.window_s = self.window_s_hint
        interval = eta.on_window(j, seconds)
        self.window_s_hint = interval if self.window_s_hint is None else 0.7 * self.window_s_hint + 0.3 * interval
        return self.shown(eta)

    def take_done(self, took_s: float) -> None:
        self.take_s_hint = took_s if self.take_s_hint is None else 0.7 * self.take_s_hint + 0.3 * took_s

    def waiting(self, ahead: int, steps: int, n: int) -> tuple[float | None, ...]:
        """ETAs of a job's `n` waiting takes: the k-th has `ahead + k` takes in front of it."""
        flight, windows = list(self.flight.values()), next(iter(self.windows_for.values()), 0)
        return wait_etas(ahead, n, steps, flight, self.max_ready, windows=windows,
                         window_s_hint=self.window_s_hint, take_s_hint=self.take_s_hint)

    def due(self) -> bool:
        """True every `WAIT_ETA_EVERY_S` while takes step: time for the waiting jobs to hear a fresh ETA."""
        now = time.monotonic()
        if now - self._sent < WAIT_ETA_EVERY_S:
            return False
        self._sent = now
        return True
