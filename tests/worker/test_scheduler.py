"""Scheduler policies, unit by unit, without a worker process.

What these tests pin: `fifo` runs the earliest job to the end; `fair` starts a new job at once and then
round-robins; `share` lets a newcomer join from the next round, older job first; cancels are reaped
before the next unit; calls run before job units, background calls (the lyrics check) after them unless they
waited too long; the job cap holds.
"""

from __future__ import annotations

import pytest

from device_worker.scheduler import Call, JobLimitError, Scheduler, WorkerJob


def _run(policy: str, units: dict[str, int], arrivals: dict[int, str]) -> tuple[list[str], list[str]]:
    """Run jobs of `units[name]` units; `arrivals[i]` = a job admitted just before unit i. Returns (trace, finish order)."""
    s = Scheduler(policy, max_jobs=8)
    left, trace, done = dict(units), [], []
    i = 0
    while True:
        if i in arrivals:
            s.add_job(WorkerJob(b"p", i, arrivals[i], label=arrivals[i]))  # rid = arrival index, unique
        item = s.next(0)
        if item is None:
            if any(k > i for k in arrivals):
                i += 1
                continue
            return trace, done
        kind, job = item
        assert kind == "job"
        trace.append(job.label)
        left[job.label] -= 1
        if left[job.label] == 0:
            s.remove(job, finished=True)
            done.append(job.label)
        else:
            s.unit_done(job)
        i += 1


def test_fifo_runs_the_earliest_job_to_the_end():
    trace, done = _run("fifo", {"long": 6, "short": 2}, {0: "long", 2: "short"})
    assert trace == ["long"] * 6 + ["short"] * 2 and done == ["long", "short"]


def test_fair_starts_a_new_job_at_once_then_round_robin():
    trace, done = _run("fair", {"long": 6, "short": 3}, {0: "long", 2: "short"})
    assert trace[:2] == ["long", "long"]
    assert trace[2] == "short", f"{trace=}: a newly arrived job runs its first unit at once"
    assert trace[2:7] == ["short", "long", "short", "long", "short"]
    assert done == ["short", "long"]


def test_share_joins_from_the_next_round_older_first():
    trace, done = _run("share", {"a": 4, "b": 4, "c": 2}, {0: "a", 1: "b", 2: "c"})
    # round 1 = [a]; round 2 = [a, b]; c arrived during round 2, joins round 3 = [a, b, c]
    assert trace[:3] == ["a", "a", "b"], f"{trace=}"
    assert trace[3:6] == ["a", "b", "c"], f"{trace=}"
    assert done[0] in ("a", "c") and set(done) == {"a", "b", "c"}


@pytest.mark.parametrize("policy", ["fifo", "fair", "share"])
def test_every_unit_runs_exactly_once(policy):
    units = {"a": 5, "b": 3, "c": 4}
    trace, done = _run(policy, units, {0: "a", 1: "b", 4: "c"})
    assert {k: trace.count(k) for k in units} == units and sorted(done) == sorted(units)


def test_cancel_is_reaped_first_and_calls_run_before_units():
    s = Scheduler("fifo", max_jobs=2)
    a, b = WorkerJob(b"p", 1, None), WorkerJob(b"p", 2, None)
    s.add_job(a)
    s.add_job(b)
    s.add_call(Call(b"p", 3, "forward"))
    assert s.cancel(b"p", 2) and not s.cancel(b"q", 2), "a cancel names the client's own job"
    assert s.next(0) == ("reap", b)
    s.remove(b)
    assert s.next(0)[0] == "call"
    assert s.next(0) == ("job", a)


def test_job_cap_and_duplicate_ids():
    s = Scheduler("fair", max_jobs=1)
    s.add_job(WorkerJob(b"p", 1, None))
    with pytest.raises(JobLimitError, match="cap 1"):
        s.add_job(WorkerJob(b"p", 2, None))
    with pytest.raises(ValueError, match="already held"):
        s.add_job(WorkerJob(b"p", 1, None))
    assert len(s) == 1


def test_next_waits_then_returns_none_and_stop_wakes():
    s = Scheduler("fifo")
    assert s.next(0.05) is None
    s.stop()
    assert s.next(5) is None


def test_a_background_call_waits_for_the_songs_being_made_but_not_forever(monkeypatch):
    from device_worker import scheduler as sched

    s = Scheduler("fair", max_jobs=2)
    a = WorkerJob(b"p", 1, None)
    s.add_job(a)
    check = Call(b"p", 2, "transcribe", background=True)
    s.add_call(check)
    s.add_call(Call(b"p", 3, "forward"))
    kind, first = s.next(0)
    assert kind == "call" and first.rid == 3  # someone waits on a FORWARD now
    assert s.next(0) == ("job", a)  # the take being made goes before the check of one already made
    assert s.next(0) == ("job", a)
    monkeypatch.setattr(sched, "BACKGROUND_MAX_WAIT_S", 0.0)  # it has waited long enough: it runs next
    assert s.next(0) == ("call", check)
    s.add_call(later := Call(b"p", 4, "transcribe", background=True))
    monkeypatch.setattr(sched, "BACKGROUND_MAX_WAIT_S", 120.0)
    assert s.next(0) == ("job", a)
    s.remove(a, finished=True)
    assert s.next(0) == ("call", later)  # nothing else to do: the check runs at once
    assert s.next(0) is None
