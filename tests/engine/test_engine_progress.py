"""Honest progress from the pipeline (issue 18, item 5): the waiting takes of a half-admitted job are
named with their position and ETA, one variation can be cancelled without its siblings, step counts read
as asked, and the ETA counts the decode from the first step."""

from __future__ import annotations

import time
from pathlib import Path

from engine_fakes import FakeDevice, Req, make

from engine.eta import TakeEta
from engine.events import Cancelled, Done, Queued, Step, TakeCancelled, TakeDone
from engine.jobs import EngineJob
from engine.units import JobContext


def submit(pipe, req, seeds):
    job = EngineJob(req)
    ctx = JobContext(job, req, seeds)
    pipe.submit(ctx)
    return job


def test_a_half_admitted_job_names_its_waiting_takes(tmp_path: Path) -> None:
    pipe, _ = make(tmp_path, FakeDevice(step_s=0.02), max_ready=2)
    first = submit(pipe, Req(steps=6), [1, 2])  # fills admission
    second = submit(pipe, Req(steps=6), [3, 4, 5])
    assert isinstance(first.wait(20), Done) and isinstance(second.wait(20), Done)
    queued = [e for e in second.events if isinstance(e, Queued)]
    assert queued[0].position == 1 and queued[0].takes == (0, 1, 2)
    # As takes are admitted the job hears which still wait, until none does.
    assert [q.takes for q in queued][-1] == () and any(0 < len(q.takes) < 3 for q in queued)
    # Once a take was timed, waiting takes get an ETA.
    third = submit(pipe, Req(steps=30), [6, 7])
    fourth = submit(pipe, Req(steps=2), [8])
    waiting = next(e for e in fourth.events if isinstance(e, Queued))
    assert waiting.eta_s > 0 and waiting.etas_s[0] == waiting.eta_s
    # Each waiting take has its own ETA: later in line, never sooner done (two slots: three takes in a
    # row span at least two rounds, and takes of one round may end together).
    fifth = submit(pipe, Req(steps=2), [9, 10, 11])
    etas = next(e for e in fifth.events if isinstance(e, Queued)).etas_s
    assert len(etas) == 3 and all(e is not None for e in etas), etas
    assert etas[0] <= etas[1] <= etas[2] and etas[0] < etas[2], etas
    third.cancel()
    fourth.wait(20)
    fifth.wait(20)
    pipe.close()


def test_cancelling_one_variation_leaves_its_siblings(tmp_path: Path) -> None:
    pipe, device = make(tmp_path, FakeDevice(step_s=0.02), max_ready=2)
    job = submit(pipe, Req(steps=40), [1, 2, 3])  # take 2 waits for room
    deadline = time.monotonic() + 10
    while not any(isinstance(e, Step) for e in job.events) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert job.cancel_take(1) and job.cancel_take(2)  # one running, one still queued
    assert not job.cancel_take(1)  # already cancelled
    final = job.wait(20)
    assert isinstance(final, Done) and [t.take for t in final.takes] == [0]
    assert {e.take for e in job.events if isinstance(e, TakeCancelled)} == {1, 2}
    assert {e.result.take for e in job.events if isinstance(e, TakeDone)} == {0}
    # The job's Cancel still cancels every take; a job whose every take was cancelled ends Cancelled.
    other = submit(pipe, Req(steps=40), [4])
    assert other.cancel_take(0) and isinstance(other.wait(20), Cancelled)
    pipe.close()


def test_steps_read_as_asked(tmp_path: Path) -> None:
    class Updates(FakeDevice):  # like the real worker: N steps asked are N - 1 updates
        def place(self, unit, sink):
            class Sink:
                def __getattr__(self, name):
                    return getattr(sink, name)

                def step(self, unit, k, total, seconds):
                    if k < total:
                        sink.step(unit, k, total - 1, seconds)

            super().place(unit, Sink())

    pipe, _ = make(tmp_path, Updates(step_s=0.0))
    job = submit(pipe, Req(steps=32), [1])
    assert isinstance(job.wait(20), Done)
    steps = [(e.k, e.total) for e in job.events if isinstance(e, Step)]
    assert steps[0] == (2, 32) and steps[-1] == (32, 32)
    pipe.close()


def test_waiting_eta_from_the_takes_in_flight() -> None:
    from engine.eta import wait_etas
    from engine.units import Unit

    def unit(steps_done: int) -> Unit:
        u = Unit(None, 0, 0)  # type: ignore[arg-type]  # only its ETA is read
        u.eta = TakeEta(steps=10, windows=0, step_s=1.0, steps_done=steps_done)
        return u

    def wait(ahead: int, n: int, flight: list[Unit], take_s_hint: float | None = None) -> tuple[float | None, ...]:
        return wait_etas(ahead, n, 10, flight, 2, windows=3, window_s_hint=1.0, take_s_hint=take_s_hint)

    flight = [unit(8), unit(2)]  # 2 s and 8 s left
    # Next in line: starts when the first ends (2 s), then 9 updates and 3 windows at 1 s each; the next
    # gets the other slot (8 s); deeper in line the slots free in turn, each running 12 s takes.
    assert wait(0, 6, flight) == (14.0, 20.0, 26.0, 32.0, 38.0, 44.0)
    assert wait(2, 4, flight) == (26.0, 32.0, 38.0, 44.0)  # a job further back: the same line
    # Slots whose ETAs spread wider than one run: the first slot runs several takes before the second
    # frees, and a take further back never reads sooner than one before it.
    slow = unit(0)
    slow.eta.steps = 40  # 40 s left, the other slot 1 s: three takes run there before the slow one frees
    assert wait(0, 5, [unit(9), slow]) == (13.0, 25.0, 37.0, 49.0, 52.0)
    # Before the takes in flight were timed: waves of the measured take time.
    untimed = [unit(0), unit(0)]
    for u in untimed:
        u.eta.step_s = None
    assert wait(4, 1, untimed, take_s_hint=5.0) == (20.0,)
    assert wait_etas(0, 2, 10, [], 2, windows=3, window_s_hint=None, take_s_hint=None) == (None, None)
    # A variation held for its sibling's first sound (in flight, not yet timed) frees no slot first: next
    # in line gets the timed take's slot (2 s, then its 12 s run), not None as when every take had to be timed.
    held = unit(0)
    held.eta.step_s = None
    assert wait(0, 1, [unit(8), held]) == (14.0,)


def test_eta_counts_the_decode_from_the_first_step() -> None:
    eta = TakeEta(steps=4, windows=3)
    t = 0.0
    eta.on_step(1, 1.0, now=t)
    readings = []
    for k in range(2, 5):
        t += 1.0
        eta.on_step(k, 1.0, now=t)
        readings.append(eta.eta())
    for j in range(1, 4):
        t += 1.0
        eta.on_window(j, 1.0, now=t)
        readings.append(eta.eta())
    assert readings == [5.0, 4.0, 3.0, 2.0, 1.0, 0.0]  # one second a unit, no jump at the decode


def test_a_shown_eta_glides_when_siblings_start_sharing_the_card() -> None:
    """Issue 26: ETAs jumped (28 s -> 63 s) when variations began to share the card. The raw estimate
    still follows the measured pace; what is shown moves a sixth of the way per event toward a later
    estimate and runs down with the clock in between, so no reading climbs by more than a sixth of the change."""
    eta = TakeEta(steps=20, windows=0)
    t, shown, raw = 0.0, [], []
    eta.on_step(1, 1.0, now=t)
    for k in range(2, 21):
        t += 1.0 if k < 8 else 4.0  # alone, then three siblings join: each step takes four times as long
        eta.on_step(k, None, now=t)
        raw.append(eta.eta())
        shown.append(eta.steady(raw[-1], now=t))
    jumps_raw = max(b - a for a, b in zip(raw, raw[1:], strict=False))
    jumps_shown = max(b - a for a, b in zip(shown, shown[1:], strict=False))
    assert jumps_raw > 8  # the pace change as measured
    assert jumps_shown <= jumps_raw / 6 + 1e-9, (shown, raw)
    assert abs(shown[-1] - raw[-1]) < 1.0  # and it settles on the estimate: it goes to zero with the song


def test_a_take_sharing_its_worker_times_its_first_step_on_the_wall_clock() -> None:
    """Three other takes share the worker, one unit each per round: the worker times this take's step at
    1 s of compute, but 4 s pass between its events. Timed from its start on the worker, the first
    reading already says 4 s a step; timed by compute alone it began at 1 s and climbed step after step
    (22 -> 50 s in a real browser while the take ran)."""
    eta = TakeEta(steps=8, windows=0)
    eta.started(now=0.0)
    readings = []
    for k in range(1, 9):
        eta.on_step(k, 1.0, now=4.0 * k)
        readings.append(eta.eta())
    assert readings[0] == 28.0  # 7 steps left at 4 s
    assert readings == sorted(readings, reverse=True)  # and it only runs down
    late = TakeEta(steps=8, windows=0)
    late.on_step(1, 1.0, now=4.0)  # never told it started: the old figure, the worker's compute time
    assert late.eta() == 7.0
