"""The take runner's memory is bounded by rules: early-playback audio under a budget, finished takes
forgotten past a count (the store keeps every take), so a long-running studio stays flat."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from studio import takes as takes_mod
from studio.store import DONE, RUNNING, Store
from studio.takes import TakeRunner


@pytest.fixture()
def runner(tmp_path: Path) -> TakeRunner:
    return TakeRunner(engine=object(), store=Store(tmp_path / "data"))


def preview_bytes(runner: TakeRunner) -> int:
    return sum(c.nbytes for t in "abc" for c in runner.live(t).chunks)


def test_preview_audio_stays_under_its_budget_oldest_take_first(runner: TakeRunner, monkeypatch) -> None:
    chunk = np.zeros((44_100 * 10, 2), dtype=np.float32)  # 10 s: 3.5 MB
    monkeypatch.setattr(takes_mod, "PREVIEW_BUDGET_BYTES", 3 * chunk.nbytes)
    for tid in ("a", "b", "c"):
        runner._set_live(tid, status=RUNNING)
    for _ in range(2):
        runner._add_chunk("a", chunk)
    runner._add_chunk("b", chunk)
    assert preview_bytes(runner) == 3 * chunk.nbytes
    runner._add_chunk("c", chunk)  # over budget: the oldest take's preview goes, not the newest
    assert preview_bytes(runner) <= 3 * chunk.nbytes
    a, b, c = (runner.live(t) for t in "abc")
    assert a.preview_dropped and a.chunks == [] and len(b.chunks) == 1 and len(c.chunks) == 1
    runner._add_chunk("a", chunk)  # a dropped take does not start hoarding again
    assert runner.live("a").chunks == []
    runner._add_chunk("c", chunk)
    runner._add_chunk("c", chunk)  # the take being added to keeps its audio even alone over budget
    assert len(runner.live("c").chunks) == 3 and runner.live("b").preview_dropped


def test_finished_takes_are_forgotten_past_a_count(runner: TakeRunner, monkeypatch) -> None:
    monkeypatch.setattr(takes_mod, "KEEP_FINISHED", 5)
    runner._set_live("live", status=RUNNING)
    for i in range(20):
        runner._set_live(f"t{i}", status=RUNNING)
        runner._set_live(f"t{i}", status=DONE)
    kept = [t for t in (f"t{i}" for i in range(20)) if runner.live(t) is not None]
    assert kept == [f"t{i}" for i in range(15, 20)]
    assert runner.live("live") is not None  # a take still rendering is never forgotten
