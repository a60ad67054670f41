"""The pool never gives up on a worker (issue 14): a real worker that cannot start for a while, then can.

The worker's interpreter is a wrapper that exits with a reason until a marker file exists. What this
pins: the slot keeps trying past the end of `restart_backoff_s` (at its longest delay) and says
"restarting (N failures): <the worker's reason>"; a song submitted meanwhile fails at once with that
reason (it does not wait blind or get a bare NoWorkerError); once the cause is gone the worker comes up
and songs are made; worker deaths in a row with no take finishing (SIGKILLs) are survived the same way.
It used to end after six failures: every later job failed with NoWorkerError even after the cause was gone.
"""

from __future__ import annotations

import functools
import os
import signal
import stat
import sys
from pathlib import Path

import numpy as np
import pytest
from waiting import wait_until

from engine.config import EngineConfig, Models, WorkerSpec
from engine.engine import Engine
from engine.events import Done, Failed
from engine.pool import NoWorkerError
from engine.request import SongRequest, Style

BACKOFF = (0.05, 0.1)


def _wrapper(d: Path) -> Path:
    script = d / "flaky-python"
    script.write_text(
        "#!/bin/sh\n"
        f'echo x >> "{d}/attempts"\n'
        f'if [ ! -e "{d}/cause-gone" ]; then\n'
        '  echo "OSError: the card is held by the test (until cause-gone exists)"\n'
        "  exit 3\n"
        "fi\n"
        f'exec "{sys.executable}" "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def _config(tmp: Path, reference_dir: Path, python: Path) -> EngineConfig:
    r = reference_dir
    models = Models(vae=str(r / "vae-tiny" / "vae_model.pt"), base=str(r / "dit-tiny-base"),
                    full=str(r / "dit-tiny-full"), negative_style=str(r / "vocal.npy"), test=True)
    return EngineConfig(data_dir=tmp / "data", models=models, crop_frames=96, lock_dir=str(tmp / "locks"),
                        workers=[WorkerSpec(threads=1, python=str(python))], restart_backoff_s=BACKOFF,
                        heartbeat_s=0.25, dead_after_s=3.0, ready_timeout_s=60.0)


def _attempts(d: Path) -> int:
    p = d / "attempts"
    return len(p.read_text().split()) if p.exists() else 0


_wait = functools.partial(wait_until, timeout_s=60.0, every_s=0.02)


def test_a_worker_that_cannot_start_for_a_while_comes_back(tmp_path: Path, reference_dir: Path) -> None:
    python = _wrapper(tmp_path)
    v = np.random.default_rng(0).standard_normal(512).astype(np.float32)
    np.save(tmp_path / "style.npy", v / np.linalg.norm(v))
    req = dict(lyrics="", style=Style(embedding=str(tmp_path / "style.npy")), steps=3)

    # A first start that never succeeds still ends (the backoff list, used once) with the worker's reason.
    with pytest.raises(NoWorkerError, match="the card is held by the test"):
        Engine(_config(tmp_path / "first", reference_dir, python))
    assert _attempts(tmp_path) == len(BACKOFF) + 1
    (tmp_path / "attempts").unlink()

    engine = Engine(_config(tmp_path, reference_dir, python), start=False)
    try:
        engine.pool.start(wait=False)
        past = 3 * (len(BACKOFF) + 1)  # well past the end of the backoff list: it used to stop here
        _wait("attempts past the backoff list", lambda: _attempts(tmp_path) >= past)
        info = engine.pool.worker_info()[0]
        assert info["state"] in ("restarting", "starting"), info
        status = _wait("a restarting status", lambda: engine.pool.worker_info()[0].get("status"))
        assert status.startswith("w0:torch:cpu restarting (") and "failures): " in status, status
        assert "the card is held by the test" in status, status

        # Submitted while no worker is up: fails at once with the worker's own reason.
        job = engine.submit(SongRequest(seed=1, **req))
        final = job.wait(30)
        assert isinstance(final, Failed), job.events
        assert final.error.startswith("NoWorkerError: no worker can run a base-model song now: "
                                      "w0:torch:cpu restarting ("), final.error
        assert "the card is held by the test" in final.error

        (tmp_path / "cause-gone").touch()  # the cause goes away: the slot that kept trying comes up
        _wait("the worker up again", lambda: engine.pool.worker_info()[0]["state"] == "ready")
        done = engine.submit(SongRequest(seed=2, **req)).result(120)
        assert isinstance(done, Done) and Path(done.takes[0].files["wav"]).stat().st_size > 0

        # Deaths in a row with no take finishing, past the backoff list again: it keeps coming back.
        for _ in range(len(BACKOFF) + 2):
            pid = engine.pool.worker_info()[0]["pid"]
            os.kill(pid, signal.SIGKILL)
            _wait("a fresh worker after a SIGKILL", lambda pid=pid: (lambda w: w["state"] == "ready"
                                                                     and w.get("pid") not in (None, pid))(
                engine.pool.worker_info()[0]))
        done = engine.submit(SongRequest(seed=3, **req)).result(120)
        assert isinstance(done, Done)
        assert engine.pool.slots[0].failures == 0  # a finished take earns the backoff back
    finally:
        engine.close()
