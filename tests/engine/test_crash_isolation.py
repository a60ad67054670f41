"""Issue 27 finding 9, crash isolation: a take that kills its worker fails alone; its neighbours finish.

A worker interleaves several takes, so when it dies every take on it is lost. The pool reports each
loss with whether the take was alone on the worker; the pipeline charges a retry only to a take that
was alone, and runs every lost take again isolated (alone on a worker), so a second death names the
take that caused it. It used to charge every take in flight: two deaths failed all of them.

The poison is real, test-side only: the worker's interpreter is a wrapper (the pool's `python` for a
worker, as in test_pool_restarts) that patches the worker core to SIGKILL its own process when the take
with one seed runs its fourth unit; nothing in the product knows about it. On top of the poison, two
SIGKILLs from outside hit the worker while it holds several innocent takes.
"""

from __future__ import annotations

import functools
import os
import signal
import stat
import sys
from pathlib import Path

import numpy as np
from waiting import wait_until

from engine.config import EngineConfig, Models, WorkerSpec
from engine.engine import Engine
from engine.events import Done, Failed, Retrying, Step
from engine.request import SongRequest, Style

POISON = 101

HOOK = f"""
import os, runpy, signal, sys
import device_worker.core as core

_run, _seen = core.WorkerCore._run_unit, {{}}

def _run_unit(self, job):
    if job.spec.song.seed == {POISON}:
        _seen[job.rid] = _seen.get(job.rid, 0) + 1
        if _seen[job.rid] == 4:  # the poison take's fourth unit: its worker dies, mid-take
            os.kill(os.getpid(), signal.SIGKILL)
    return _run(self, job)

core.WorkerCore._run_unit = _run_unit
assert sys.argv[1:3] == ["-m", "device_worker"], sys.argv
sys.argv = ["device_worker", *sys.argv[3:]]
runpy.run_module("device_worker", run_name="__main__", alter_sys=True)
"""


def _poison_python(d: Path) -> Path:
    (d / "poison_hook.py").write_text(HOOK)
    script = d / "poison-python"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{d}/poison_hook.py" "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


_wait = functools.partial(wait_until, timeout_s=120.0, every_s=0.02)


def test_finding_9_a_poison_take_fails_alone_and_the_others_finish(tmp_path: Path, reference_dir: Path) -> None:
    r = reference_dir
    models = Models(vae=str(r / "vae-tiny" / "vae_model.pt"), base=str(r / "dit-tiny-base"),
                    full=str(r / "dit-tiny-full"), negative_style=str(r / "vocal.npy"), test=True)
    config = EngineConfig(data_dir=tmp_path / "data", models=models, crop_frames=96, lock_dir=str(tmp_path / "locks"),
                          workers=[WorkerSpec(threads=1, python=str(_poison_python(tmp_path)))],
                          worker_max_jobs=4, max_ready=6, restart_backoff_s=(0.05, 0.1, 0.2, 0.4, 0.8),
                          heartbeat_s=0.25, dead_after_s=5.0, ready_timeout_s=120.0)
    v = np.random.default_rng(0).standard_normal(512).astype(np.float32)
    np.save(tmp_path / "style.npy", v / np.linalg.norm(v))
    style = Style(embedding=str(tmp_path / "style.npy"))
    with Engine(config) as engine:
        def submit(seeds: range) -> dict:
            return {seed: engine.submit(SongRequest(lyrics="", style=style, steps=12, seed=seed)) for seed in seeds}

        def settle(wave: dict) -> None:
            for job in wave.values():
                job.wait(300)

        # Three waves of four takes, each filling the idle worker (4 jobs at once). In the first, the
        # poison kills its worker with its three neighbours on it.
        first = submit(range(100, 104))
        poison = first.pop(POISON)
        settle(first)
        _wait("the poison take ended", lambda: poison.final is not None)
        jobs = dict(first)
        # Two more deaths, from outside, each while the worker holds four innocent takes that stepped.
        for seeds in (range(104, 108), range(108, 112)):
            wave = submit(seeds)

            def crowded() -> int | None:
                slot = engine.pool.slots[0]
                units = list(slot.units.values())
                if slot.state != "ready" or len(units) < 4:
                    return None
                stepped = all(any(isinstance(e, Step) and e.take == u.take for e in u.job.events) for u in units)
                return slot.info.get("pid") if stepped else None

            os.kill(_wait("the worker busy with four takes", crowded), signal.SIGKILL)
            settle(wave)
            jobs.update(wave)
        finals = {seed: job.final for seed, job in jobs.items()}

    failed = {seed: f.error for seed, f in finals.items() if not isinstance(f, Done)}
    assert not failed, failed  # every innocent take finished, however many deaths it saw
    assert isinstance(poison.final, Failed), poison.events
    assert poison.final.error.startswith("WorkerDeadError: worker w0"), poison.final.error
    assert "likely cause" in poison.final.error, poison.final.error
    # The poison shared the worker when it first killed it (free retry), then died alone twice.
    retries = [e.reason for e in poison.events if isinstance(e, Retrying)]
    assert len(retries) == 2 and "shared the worker" in retries[0] and "shared" not in retries[1], retries
    # Its neighbours at the first death and the victims of the outside kills were retried free.
    shared = [seed for seed, job in jobs.items()
              if any(isinstance(e, Retrying) and "shared the worker" in e.reason for e in job.events)]
    assert sorted(shared) == sorted(jobs), shared  # its three neighbours, and four per outside kill
    for job in jobs.values():
        assert Path(job.final.takes[0].files["wav"]).stat().st_size > 0
