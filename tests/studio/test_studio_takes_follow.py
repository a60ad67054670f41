"""What a follower of the takes (the page's progress pane) sees is whole: one engine event that moves
several takes reaches it all at once or not at all, and a snapshot it holds does not change under it.

Seen in CI: sixteen variations, twelve waiting; a fresh Queued event re-timed the line, and the page
drew 13, 19, 25, 31 s for the first four waiting takes beside the stale 3-4 s of the eight behind them.
"""

from __future__ import annotations

import threading
from pathlib import Path

from engine import events as ev
from engine.request import SongRequest
from studio.store import QUEUED, Store
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
