"""`studio serve` as a real process: restart survival of sessions and interrupted takes, memory size.

What this pins: a studio killed mid-song (SIGKILL, like a power cut) comes back with every session,
the running take marked "interrupted" and retryable; the serve process stays small (no torch in it).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from studio_helpers import ServeProcess, form
from waiting import wait_until


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_restart_keeps_sessions_and_marks_running_takes_interrupted(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = ServeProcess(data, tmp_path)  # full-length songs: slow enough to be killed mid-way
    try:
        c = first.wait_ready()
        done = c.predict(form(title="Before the crash"), "", api_name="/submit")
        long = c.predict(form(steps=64, title="Cut short"), "", api_name="/submit")
        # Killed once the store holds a step: what a crash mid-song leaves (a follow's event can be ahead of
        # the row; on the two-head test model a step takes a fifth of a second).
        running = wait_until("the take's row to say it is at a step", lambda: (
            t := c.predict(long["takes"][0], api_name="/take"))["phase"].startswith("step") and t, every_s=0.2)
        assert running["status"] == "running"
    finally:
        first.kill()
    second = ServeProcess(data, tmp_path, "--test-crop-frames", "64")
    try:
        c = second.wait_ready()
        sessions = {s["title"]: s["id"] for s in c.predict("", api_name="/sessions")}
        assert {"Before the crash", "Cut short"} <= set(sessions)
        cut = c.predict(long["takes"][0], api_name="/take")
        assert cut["status"] == "interrupted" and "step" in cut["phase"]
        assert cut["seed"] == long["seeds"][0]  # the seed was recorded before the crash
        before = c.predict(done["takes"][0], api_name="/take")
        assert before["status"] in ("interrupted", "done")
        retry = c.predict(long["session_id"], long["takes"][0], api_name="/retry")
        assert retry["seed"] == long["seeds"][0] and retry["retry_of"] == long["takes"][0]
        final = list(c.submit(retry["take_id"], api_name="/follow"))[-1]
        assert final["status"] == "done" and final["seed"] == long["seeds"][0]
        rss = rss_mb(second.proc.pid)
        print(f"studio serve RSS with the test model after a take: {rss:.0f} MB")
        assert rss < 500, f"studio serve uses {rss:.0f} MB"
    finally:
        second.stop()
    assert second.proc.returncode is not None


def test_a_graceful_stop_leaves_running_takes_interrupted_not_cancelled(tmp_path: Path) -> None:
    """SIGTERM / Ctrl-C closes the engine, which cancels its jobs; the studio records them as interrupted
    (retryable, "the studio stopped"), the same as after a crash, not as if the musician cancelled."""
    from studio_helpers import api_client, studio_on_test_model

    with studio_on_test_model(tmp_path) as (url, svc):
        c = api_client(url, svc.config.data_dir)
        r = c.predict(form(steps=200, variations=12), "", api_name="/submit")
        for snap in c.submit(r["takes"][0], api_name="/follow"):
            if str(snap.get("phase", "")).startswith("step"):
                break
    takes = svc.store.list_takes(r["session_id"])
    stopped = [t for t in takes if t.status != "done"]
    assert stopped and {t.status for t in stopped} == {"interrupted"}, [t.status for t in takes]
    assert all("the studio stopped" in t.phase for t in stopped)


def test_hand_picked_checkpoints_are_sorted_into_base_and_full(tmp_path: Path) -> None:
    import click

    from studio.cli.options import resolve_models
    from studio.testmodel import ensure_test_models

    files = ensure_test_models()
    models = resolve_models("release", (files.full, files.base), files.vae, str(tmp_path / "empty"))
    assert (models.base, models.full, models.vae, models.test) == (files.base, files.full, files.vae, False)
    with pytest.raises(click.UsageError, match="--vae"):
        resolve_models("release", (files.base,), None, str(tmp_path / "empty"))
