"""What a follower of the takes (the page's progress pane) sees is whole: one engine event that moves
several takes reaches it all at once or not at all, and a snapshot it holds does not change under it.
A follower that asks for a gap between snapshots gets no more than that, and still the last state.

Seen in CI: sixteen variations, twelve waiting; a fresh Queued event re-timed the line, and the page
drew 13, 19, 25, 31 s for the first four waiting takes beside the stale 3-4 s of the eight behind them.
"""

from __future__ import annotations

import threading
import time
from itertools import pairwise
from pathlib import Path

from engine import events as ev
from engine.request import SongRequest
from studio.store import CANCELLED, QUEUED, Store
from studio.takes import TakeRunner

TAKES, RUNNING_AT_ONCE, ROUNDS = 16, 4, 60


class QueueJob:
    """An engine job that only re-times its waiting takes, round after round, then is cancelled."""

    id = "job-follow"

    def __init__(self) -> None:
        self.go = threading.Event()

    def __iter__(self):
        self.go.wait(10)
        waiting = tuple(range(RUNNING_AT_ONCE, TAKES))
        for r in range(ROUNDS):
            per_take = 1.0 + r  # each round moves every waiting take's ETA; within a round they grow with the place
            yield ev.Queued(self.id, position=1, ahead=0, takes=waiting,
                            etas_s=tuple(per_take * (k + 1) for k in range(len(waiting))))
        yield ev.Cancelled(self.id, reason="test over")

    def cancel(self, reason: str) -> None: ...

    def cancel_take(self, index: int, reason: str) -> bool:
        return False


class QueueEngine:
    def __init__(self) -> None:
        self.job = QueueJob()

    def submit(self, request, *, interactive: bool = False, validation=None) -> QueueJob:
        return self.job


def test_a_follower_never_sees_a_queued_event_half_applied(tmp_path: Path) -> None:
    engine = QueueEngine()
    runner = TakeRunner(engine=engine, store=Store(tmp_path / "data"))
    session = runner.store.create_session(title="follow")
    ids = [t.id for t in runner.submit(session.id, SongRequest(variations=TAKES, seed=1))]
    torn: list[list[float | None]] = []
    seen = 0

    def follow() -> None:
        nonlocal seen
        for snap in runner.follow(ids, timeout_s=0.2):
            etas = [(k, snap[t].eta_s) for k, t in enumerate(ids[RUNNING_AT_ONCE:])
                    if snap[t].status == QUEUED and snap[t].eta_s is not None]
            if etas:
                seen += 1
                # One round's ETAs: each a multiple k+1 of that round's per-take figure.
                if len({round(e / (k + 1), 6) for k, e in etas}) != 1:
                    torn.append([e for _, e in etas])

    follower = threading.Thread(target=follow)
    follower.start()
    engine.job.go.set()
    follower.join(30)
    assert not follower.is_alive(), "the follower never saw the job end"
    assert seen >= 1, "no snapshot with the queued takes' ETAs reached the follower"
    assert not torn, f"{len(torn)} snapshot(s) mixed two rounds, e.g. {torn[0]}"


class StepJob:
    """An engine job whose four takes step as fast as the host can send it, then is cancelled."""

    id = "job-steps"
    STEPS = 400

    def __init__(self) -> None:
        self.go = threading.Event()

    def __iter__(self):
        self.go.wait(10)
        for k in range(1, self.STEPS + 1):
            for take in range(RUNNING_AT_ONCE):
                yield ev.Step(self.id, take=take, k=k, total=self.STEPS, step_s=0.0, eta_s=None)
            time.sleep(0.001)
        yield ev.Cancelled(self.id, reason="test over")

    def cancel(self, reason: str) -> None: ...

    def cancel_take(self, index: int, reason: str) -> bool:
        return False


class StepEngine:
    def __init__(self) -> None:
        self.job = StepJob()

    def submit(self, request, *, interactive: bool = False, validation=None) -> StepJob:
        return self.job


def test_a_follower_with_a_gap_gets_snapshots_no_closer_than_it_and_the_last_state(tmp_path: Path) -> None:
    engine = StepEngine()
    runner = TakeRunner(engine=engine, store=Store(tmp_path / "data"))
    session = runner.store.create_session(title="gap")
    ids = [t.id for t in runner.submit(session.id, SongRequest(variations=RUNNING_AT_ONCE, seed=1))]
    gap = 0.1
    times: list[float] = []
    last: dict = {}

    def follow() -> None:
        nonlocal last
        for snap in runner.follow(ids, min_gap_s=gap):
            times.append(time.monotonic())
            last = snap

    follower = threading.Thread(target=follow)
    follower.start()
    engine.job.go.set()
    follower.join(30)
    assert not follower.is_alive(), "the follower never saw the job end"
    gaps = [b - a for a, b in pairwise(times)]
    assert len(times) >= 3 and min(gaps) >= gap * 0.95, (len(times), min(gaps))
    # 1600 step events: without the gap a follower sees most of them; with it, a few per gap.
    assert len(times) < StepJob.STEPS * RUNNING_AT_ONCE / 20, len(times)
    assert {lv.status for lv in last.values()} == {CANCELLED}, last
