"""The pipeline, jobs and events with an in-process fake device stage (no worker, no torch): ordering,
subscribers, cancel, failure isolation, busy rejection, retry on a lost worker."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from engine_fakes import FakeDevice, Req, make, submit

from engine.events import (
    AudioChunk,
    Cancelled,
    Decoding,
    Done,
    Failed,
    Preparing,
    Queued,
    Retrying,
    Running,
    Step,
    TakeDone,
)
from engine.jobs import EngineJob
from engine.units import BusyError


def held(job: EngineJob) -> int:
    """Audio chunks still in the job's history."""
    return sum(isinstance(e, AudioChunk) for e in job.events)


def test_events_in_order_and_files(tmp_path: Path) -> None:
    pipe, _ = make(tmp_path)
    job, (sub,) = submit(pipe, Req(steps=3), [7], subscribe=1)
    events = list(sub)
    assert [type(e) for e in events] == [Queued, Preparing, Running, Step, Step, Step, Decoding, AudioChunk,
                                         Decoding, AudioChunk, TakeDone, Done]
    assert [e.k for e in events if isinstance(e, Step)] == [1, 2, 3]
    assert isinstance(events[0], Queued) and events[0].position == 0
    done = events[-1]
    audio = np.load(done.takes[0].files["npy"])
    assert audio.shape == (2, 2000)
    assert np.array_equal(audio[:, :1000], np.random.default_rng(7).standard_normal((2, 1000)).astype(np.float32))
    # Audio chunks were pruned from history once the job ended and its one subscriber had read them;
    # a later subscriber replays every other event from the first.
    assert held(job) == 0
    assert [type(e) for e in list(job)] == [t for t in map(type, events) if t is not AudioChunk]
    # ETAs fall as the steps proceed.
    etas = [e.eta_s for e in events if isinstance(e, Step)]
    assert etas[-1] is not None and etas[-1] <= etas[0]
    pipe.close()


def test_variations_and_several_subscribers_sync_and_async(tmp_path: Path) -> None:
    """Three live subscribers, one of which reads nothing until the job has ended: all three see every
    event, audio chunks included (they used to be pruned at the end under a slow reader's feet)."""
    pipe, _ = make(tmp_path)
    job, (fast, slow, aio) = submit(pipe, Req(steps=2), [100, 101, 102], subscribe=3)
    seen: dict[str, list[str]] = {}

    def follow(name: str, sub, wait_first: bool) -> None:
        if wait_first:
            job.wait(10)  # the slow one: the job has ended before it reads its first event
        seen[name] = [e.kind for e in sub]

    threads = [threading.Thread(target=follow, args=("fast", fast, False)),
               threading.Thread(target=follow, args=("slow", slow, True))]
    for t in threads:
        t.start()

    async def follow_async() -> list[str]:
        return [e.kind async for e in aio.aiter()]

    async_kinds = asyncio.run(follow_async())
    for t in threads:
        t.join(10)
    done = job.result(10)
    assert [t.seed for t in done.takes] == [100, 101, 102]
    assert seen["fast"] == seen["slow"] == async_kinds and async_kinds[-1] == "done"
    assert async_kinds.count("takedone") == 3 and async_kinds.count("audiochunk") == 6
    assert held(job) == 0  # every live subscriber read them: dropped from history
    pipe.close()


def _chunk(job: EngineJob, j: int) -> AudioChunk:
    return AudioChunk(job.id, take=0, j=j, total=3, start=(j - 1) * 10, audio=np.full((10, 2), j, np.float32))


def test_a_slow_subscriber_never_loses_an_event() -> None:
    job = EngineJob(None)
    fast, slow = job.subscribe(), job.subscribe()
    events = [Queued(job.id, position=0, ahead=0), Running(job.id, take=0, seed=1, worker="w"),
              *(_chunk(job, j) for j in (1, 2, 3)), Done(job.id, takes=(), timings={})]
    for e in events:
        job.publish(e)
    assert list(fast) == events
    assert held(job) == 3  # the slow one has not read them yet: kept
    assert slow.get(1) is events[0] and slow.get(1) is events[1] and slow.get(1) is events[2]
    assert held(job) == 2  # dropped behind the slowest cursor as it reads
    assert list(slow) == events[3:]
    assert held(job) == 0
    assert list(job) == [events[0], events[1], events[5]]  # a later subscriber: every other event


def test_a_written_takes_audio_goes_before_the_job_ends() -> None:
    """A job's Done waits for its takes' lyrics checks; holding every written take's early-playback audio
    until then kept hundreds of MB in the studio under load (issue 27, finding 7). Once a take is written
    (TakeDone) or cancelled, its chunks go as soon as every live subscriber has read them; a take still
    rendering keeps its chunks for listeners that join late."""
    from engine.events import TakeCancelled, TakeDone, TakeResult

    job = EngineJob(None, audio_linger_s=0.05)
    reader = job.subscribe()

    def chunk(take: int, j: int) -> AudioChunk:
        return AudioChunk(job.id, take=take, j=j, total=2, start=(j - 1) * 10, audio=np.zeros((10, 2), np.float32))

    for e in [chunk(0, 1), chunk(1, 1), chunk(0, 2), chunk(2, 1)]:
        job.publish(e)
    assert [reader.get(1).take for _ in range(4)] == [0, 1, 0, 2]
    assert held(job) == 4  # nothing settled yet: a late listener still hears every take
    job.publish(TakeDone(job.id, result=TakeResult(take=0, seed=1, files={}, timings={}, worker="w")))
    assert held(job) == 2  # take 0's two chunks, read by everyone, are gone; 1 and 2 render on
    late = job.subscribe()  # joins now: hears takes 1 and 2 from their start, and take 0's files
    job.publish(TakeCancelled(job.id, take=2))
    assert held(job) == 2  # the late one has not read take 2's chunk yet
    deadline = time.monotonic() + 10
    while held(job) > 1 and time.monotonic() < deadline:  # the linger after settling runs out
        time.sleep(0.01)
    assert held(job) == 1  # take 1, still rendering, keeps its chunk
    kinds_ = [(e.kind, getattr(e, "take", None)) for e in (late.get(1), late.get(1), late.get(1))]
    assert kinds_ == [("fellbehind", None), ("audiochunk", 1), ("takedone", None)], kinds_


def test_a_subscriber_that_stops_reading_is_told_it_fell_behind() -> None:
    job = EngineJob(None, audio_linger_s=0.05)
    stalled, gone = job.subscribe(), job.subscribe()
    done = Done(job.id, takes=(), timings={})
    for e in [Queued(job.id, position=0, ahead=0), _chunk(job, 1), _chunk(job, 2), done]:
        job.publish(e)
    assert gone.get(1).kind == "queued" and gone.get(1).kind == "audiochunk"
    deadline = time.monotonic() + 10
    while held(job) and time.monotonic() < deadline:  # the linger after the end runs out
        time.sleep(0.01)
    assert held(job) == 0
    kinds_ = [(e.kind, getattr(e, "missed", None)) for e in stalled]
    assert kinds_ == [("fellbehind", 2), ("queued", None), ("done", None)]
    assert [(e.kind, getattr(e, "missed", None)) for e in gone] == [("fellbehind", 1), ("done", None)]


def test_a_lagging_subscriber_that_closes_or_is_dropped_frees_the_audio_at_once() -> None:
    import gc

    job = EngineJob(None)
    closed, dropped = job.subscribe(), job.subscribe()
    for e in [_chunk(job, 1), _chunk(job, 2), Done(job.id, takes=(), timings={})]:
        job.publish(e)
    assert held(job) == 2
    closed.close()
    assert held(job) == 2  # the other one still holds them
    del dropped
    gc.collect()
    assert held(job) == 0 and job.subscribers == 0


def test_failing_request_next_to_good_one(tmp_path: Path) -> None:
    pipe, _ = make(tmp_path)
    bad = submit(pipe, Req(fail="no such style"), [1])
    good = submit(pipe, Req(steps=2), [2])
    assert isinstance(bad.wait(10), Failed) and bad.final.error == "ValueError: no such style"
    assert isinstance(good.wait(10), Done)
    pipe.close()


def test_busy_at_queue_limit(tmp_path: Path) -> None:
    pipe, _ = make(tmp_path, FakeDevice(step_s=0.05), max_ready=1, queue_limit=2)
    jobs = [submit(pipe, Req(steps=4), [i]) for i in range(3)]  # 1 admitted + 2 waiting
    with pytest.raises(BusyError, match="queue is full"):
        submit(pipe, Req(steps=4), [9])
    assert [j.events[0].position for j in jobs] == [0, 1, 2]
    for j in jobs:
        assert isinstance(j.wait(20), Done)
    # Positions moved up as the queue drained (a place is repeated when a fresh ETA is sent).
    positions = [e.position for e in jobs[2].events if isinstance(e, Queued)]
    assert [p for i, p in enumerate(positions) if i == 0 or p != positions[i - 1]] == [2, 1]
    pipe.close()


@pytest.mark.parametrize("phase", ["queued", "preparing", "steps"])
def test_cancel_at_each_phase(tmp_path: Path, phase: str) -> None:
    pipe, device = make(tmp_path, FakeDevice(step_s=0.05), max_ready=1)
    blocker = submit(pipe, Req(steps=4), [1])
    job = submit(pipe, Req(steps=20, prep_s=0.5 if phase == "preparing" else 0.0), [2])
    if phase == "queued":
        job.cancel()
    else:
        blocker.wait(20)
        want = Preparing if phase == "preparing" else Step
        deadline = time.monotonic() + 10
        while not any(isinstance(e, want) for e in job.events) and time.monotonic() < deadline:
            time.sleep(0.005)
        job.cancel()
    final = job.wait(10)
    assert isinstance(final, Cancelled)
    assert not any(isinstance(e, TakeDone) for e in job.events)
    if phase == "steps":
        steps = [e.k for e in job.events if isinstance(e, Step)]
        assert 0 < len(steps) < 20
    assert isinstance(blocker.wait(10), Done)
    assert pipe.in_flight() == 0
    pipe.close()


def test_interactive_job_cancelled_when_last_subscriber_leaves(tmp_path: Path) -> None:
    pipe, _ = make(tmp_path, FakeDevice(step_s=0.05))
    job = submit(pipe, Req(steps=50), [3], interactive=True)
    a, b = job.subscribe(), job.subscribe()
    assert a.get(5) is not None
    a.close()
    time.sleep(0.1)
    assert not job.cancel_requested  # one listener is still there
    b.close()
    assert isinstance(job.wait(10), Cancelled)
    pipe.close()


def test_lost_worker_retried_once_then_failed(tmp_path: Path) -> None:
    pipe, device = make(tmp_path, FakeDevice(lose=1))
    job = submit(pipe, Req(steps=4), [5])
    assert isinstance(job.wait(10), Done)
    assert [e.attempt for e in job.events if isinstance(e, Running)] == [1, 2]
    assert sum(isinstance(e, Retrying) for e in job.events) == 1
    device.lose = 2
    job2 = submit(pipe, Req(steps=4), [6])
    final = job2.wait(10)
    assert isinstance(final, Failed) and final.error.startswith("WorkerDeadError: worker fake0 died")
    pipe.close()
