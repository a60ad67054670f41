"""An in-process fake device stage for the pipeline tests (no worker, no torch): `steps` steps then 2
windows of seeded noise per unit, each on its own thread, and the helpers that build a pipeline on it."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np

from engine.events import Preparing, TakeResult
from engine.jobs import EngineJob
from engine.pipeline import Pipeline
from engine.units import JobContext, Prepared, Unit


class FakeDevice:
    """Runs each unit on its own thread: `steps` steps then 2 windows of seeded noise."""

    def __init__(self, *, step_s: float = 0.01, capacity: int = 4, lose: int = 0):
        self.step_s, self.capacity, self.lose = step_s, capacity, lose
        self.sem = threading.Semaphore(capacity)
        self.live: dict[str, Unit] = {}
        self.cancelled: set[str] = set()
        self.busy_log: list[tuple[float, float]] = []

    def units_of(self, ctx: JobContext) -> list[Unit]:
        return [u for u in list(self.live.values()) if u.ctx is ctx]

    def place(self, unit: Unit, sink) -> None:
        self.sem.acquire()
        self.live[unit.key] = unit
        threading.Thread(target=self._run, args=(unit, sink), daemon=True).start()

    def cancel(self, unit: Unit) -> None:
        self.cancelled.add(unit.key)

    def _run(self, unit: Unit, sink) -> None:
        try:
            sink.running(unit, "fake0")
            total = unit.ctx.request.steps
            for k in range(1, total + 1):
                time.sleep(self.step_s)
                if unit.key in self.cancelled:
                    sink.cancelled(unit)
                    return
                if self.lose > 0 and k == total // 2 + 1:
                    self.lose -= 1
                    sink.lost(unit, "worker fake0 died (test)")
                    return
                sink.step(unit, k, total, self.step_s)
            rng = np.random.default_rng(unit.seed)
            for j in (1, 2):
                block = rng.standard_normal((2, 1000)).astype(np.float32)
                sink.window(unit, j, 2, 0.001, (j - 1) * 1000, block)
            sink.done(unit, {"steps": total * self.step_s, "decode": 0.002})
        finally:
            self.live.pop(unit.key, None)
            self.sem.release()


class Req:
    def __init__(self, steps: int = 3, fail: str | None = None, prep_s: float = 0.0):
        self.steps, self.fail, self.prep_s = steps, fail, prep_s


def prepare(ctx: JobContext) -> Prepared:
    ctx.job.publish(Preparing(ctx.job.id, what="lyrics"))
    time.sleep(ctx.request.prep_s)
    if ctx.request.fail:
        raise ValueError(ctx.request.fail)
    return Prepared(tokens=np.zeros(10, np.int64), style=np.zeros(512, np.float32),
                    negative_style=np.zeros(512, np.float32), song_duration=None)


def make_writer(out: Path):
    def write(unit: Unit) -> TakeResult:
        audio = unit.audio()
        path = out / f"{unit.job.id}-{unit.take}.npy"
        np.save(path, audio)
        return TakeResult(unit.take, unit.seed, {"npy": str(path)}, dict(unit.device_timings), unit.worker)
    return write


def make(tmp_path: Path, device: FakeDevice | None = None, **kw) -> tuple[Pipeline, FakeDevice]:
    device = device or FakeDevice()
    pipe = Pipeline(prepare=prepare, device=device, write=make_writer(tmp_path),
                    max_ready=kw.pop("max_ready", 4), queue_limit=kw.pop("queue_limit", 8), **kw)
    return pipe, device


def submit(pipe: Pipeline, req: Req, seeds: list[int], *, subscribe: int = 0, **kw):
    """The job; with `subscribe=n`, (job, n subscriptions made before the job can start): live from the
    first event whatever the machine's load (a subscriber made later may come after the job ended)."""
    job = EngineJob(req, **kw)
    subs = [job.subscribe() for _ in range(subscribe)]
    ctx = JobContext(job, req, seeds)
    pipe.submit(ctx)
    return (job, subs) if subscribe else job


def kinds(job: EngineJob) -> list[str]:
    return [e.kind for e in job.events]
