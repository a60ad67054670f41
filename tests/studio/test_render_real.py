"""`studio render` end to end: real `studio render` processes with real worker processes on the test model
(songs cropped to 64 frames, 4 steps), interrupted with SIGINT, killed with SIGKILL, and resumed.

One mixed jobs file runs three times:
  1. SIGINT while the slow job renders: finished jobs are complete, the one in flight is reported
     cancelled, nothing half-written is left, exit 130.
  2. `--resume` with one job changed: the unchanged one is skipped, the changed one rendered again; then
     SIGKILL mid-way (nothing can clean up): the killed job leaves no folder that looks complete.
  3. `--resume`: only what is missing renders; the failing job has failure.json; exit 1; the manifest,
     the JSON summary and the studio's store agree.
  4. `--resume` of the good jobs only: all skipped, no worker started, exit 0.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf

ROOT = Path(__file__).resolve().parents[2]
CROP = 64
LRC = "[00:01.00]hello neon night\n[00:03.00]goodbye moon\n[00:05.00]\n"


def jobs_lines(e_cfg: float) -> list[dict[str, Any]]:
    return [
        {"id": "a", "lyrics": "words/a.lrc", "style": "warm jazz", "duration": 95, "steps": 4, "seed": 11},
        {"id": "e", "style": "rock", "duration": 95, "steps": 4, "seed": 12, "cfg": e_cfg},
        {"id": "bad", "style": "rock", "duration": 20, "steps": 0, "colour": "red"},
        {"id": "f", "style": "pop", "duration": 95, "steps": 4, "seed": 14,
         "edit": {"song": "ref.wav", "segments": [[60, 70]]}},  # past the test crop: fails when prepared
        {"id": "b", "style": "slow", "duration": 95, "steps": 200, "variations": 4, "seed": 13},
        {"id": "d", "style": "x", "duration": 95, "steps": 4},
        {"id": "c", "style": "pop", "duration": 95, "steps": 4, "variations": 2, "formats": ["wav", "flac"]},
        {"id": "d", "style": "y", "duration": 95, "steps": 4},
    ]


def write_jobs(tmp: Path, e_cfg: float) -> Path:
    path = tmp / "album.jsonl"
    path.write_text("\n".join(json.dumps(j) for j in jobs_lines(e_cfg)) + "\n", encoding="utf-8")
    return path


class Run:
    def __init__(self, tmp: Path, jobs: Path, *extra: str) -> None:
        self.tmp = tmp
        env = {**os.environ, "DRS_LOCK_DIR": str(tmp / "locks"), "STUDIO_LOG_LEVEL": "WARNING"}
        argv = [sys.executable, "-m", "studio.cli", "render", str(jobs), "-o", str(tmp / "out"), "--model", "test",
                "--test-crop-frames", str(CROP), "--threads", "1", "--data-dir", str(tmp / "data"),
                "--session", "Overnight", "--json", *extra]
        self.stderr = open(tmp / f"stderr-{time.monotonic_ns()}.txt", "w+")  # noqa: SIM115 - read after exit
        self.proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=self.stderr, text=True)

    def wait(self, timeout: float = 120) -> tuple[int, dict[str, Any], str]:
        out, _ = self.proc.communicate(timeout=timeout)
        self.stderr.seek(0)
        err = self.stderr.read()
        return self.proc.returncode, json.loads(out) if out.strip() else {}, err


def manifest(tmp: Path) -> dict[str, Any]:
    try:
        return json.loads((tmp / "out" / "manifest.json").read_text())
    except (OSError, ValueError):
        return {}


def outcome(m: dict[str, Any], job_id: str) -> str | None:
    return next((j["outcome"] for j in m.get("jobs", []) if j.get("id") == job_id and j["outcome"] != "invalid"),
                None)


def wait_for(pred: Any, run: Run, timeout: float = 150) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if run.proc.poll() is not None:
            raise AssertionError(f"studio render exited early ({run.proc.returncode}): {run.wait()[2][-3000:]}")
        assert time.monotonic() < deadline, f"timed out; manifest: {manifest(run.tmp)}"
        time.sleep(0.05)


def folder_state(out: Path) -> dict[str, set[str]]:
    return {p.name: {f.name for f in p.iterdir()} for p in out.iterdir() if p.is_dir()}


def assert_complete(out: Path, job_id: str, takes: int) -> dict[str, Any]:
    rec = json.loads((out / job_id / "render.json").read_text())
    assert rec["status"] == "done" and len(rec["takes"]) == takes
    for t in rec["takes"]:
        audio, rate = sf.read(out / job_id / t["files"]["wav"], dtype="int16")
        assert rate == 44100 and audio.shape == (CROP * 2048, 2)
        take_record = json.loads((out / job_id / t["files"]["json"]).read_text())
        assert take_record["seed"] == t["seed"] and take_record["models"]["kind"].startswith("TEST MODEL")
    return rec


@pytest.fixture()
def batch_dir(tmp_path: Path) -> Path:
    (tmp_path / "words").mkdir()
    (tmp_path / "words" / "a.lrc").write_text(LRC, encoding="utf-16")  # any encoding engine.textfile reads
    t = np.arange(44100 * 3) / 44100
    sf.write(tmp_path / "ref.wav", np.stack([np.sin(2 * np.pi * 220 * t)] * 2, axis=1) * 0.3, 44100)
    return tmp_path


def test_interrupt_kill_and_resume(batch_dir: Path) -> None:
    tmp, out = batch_dir, batch_dir / "out"
    jobs = write_jobs(tmp, e_cfg=4.0)

    # 1. SIGINT while "b" (slow) renders.
    run = Run(tmp, jobs)
    # "a" is sung: its lyrics check runs when the card has no song unit ready, so "a" may still be running
    # here with its audio made (fifo: e done means a's takes are made); Ctrl-C keeps it and lets it finish.
    wait_for(lambda: outcome(manifest(tmp), "b") == "running" and outcome(manifest(tmp), "e") == "done", run)
    run.proc.send_signal(signal.SIGINT)
    code, summary, err = run.wait()
    assert code == 130, err[-2000:]
    m = manifest(tmp)
    assert m["status"] == summary["status"] == "interrupted"
    assert {j: outcome(m, j) for j in "aefb"} == {"a": "done", "e": "done", "f": "failed", "b": "cancelled"}
    assert outcome(m, "c") in ("cancelled", "not-started")
    invalid = sorted(j["line"] for j in m["jobs"] if j["outcome"] == "invalid")
    assert invalid == [3, 6, 8]
    assert "stopping: cancelling the job in flight" in err and "b: cancelled" in err
    first = folder_state(out)
    assert set(first) == {"a", "e", "f"}  # no b or c folder, no hidden temporaries
    assert first["f"] == {"failure.json"}
    failure = json.loads((out / "f" / "failure.json").read_text())
    assert "TEST MODE crops songs" in failure["error"] and failure["line"] == 4
    rec_a = assert_complete(out, "a", 1)
    rec_e1 = assert_complete(out, "e", 1)
    a_wav = out / "a" / rec_a["takes"][0]["files"]["wav"]
    a_stat = a_wav.stat()

    # 2. Change "e"; --resume renders e again (a is skipped); SIGKILL while b renders.
    jobs = write_jobs(tmp, e_cfg=5.0)
    run = Run(tmp, jobs, "--resume")
    wait_for(lambda: outcome(manifest(tmp), "b") == "running" and outcome(manifest(tmp), "e") == "done", run)
    workers = [w["pid"] for w in manifest(tmp).get("workers", [])]
    run.proc.kill()
    run.wait()
    for pid in workers:  # the worker outlives a SIGKILLed engine (own session); it is this test's to end
        _kill_and_reap(pid)
    assert outcome(manifest(tmp), "a") == "skipped"
    rec_e2 = assert_complete(out, "e", 1)
    assert rec_e2["identity_hash"] != rec_e1["identity_hash"]
    assert not (out / "b").exists()  # whatever was in flight is hidden debris, never a complete-looking folder
    assert all(p.name.startswith(".partial-") for p in out.iterdir() if p.is_dir() and p.name not in first)

    # 3. --resume: only b and c (missing) and f (failed before) render; exit 1 for f and the invalid lines.
    run = Run(tmp, jobs, "--resume")
    code, summary, err = run.wait()
    assert code == 1, err[-2000:]
    m = manifest(tmp)
    assert m["status"] == "complete"
    assert {j: outcome(m, j) for j in "aebcf"} == {"a": "skipped", "e": "skipped", "b": "done", "c": "done",
                                                    "f": "failed"}
    assert m["counts"] == {"skipped": 2, "done": 2, "failed": 1, "invalid": 3} == summary["counts"]
    assert [(j["id"], j["outcome"]) for j in summary["jobs"]] == [(j["id"], j["outcome"]) for j in m["jobs"]]
    assert set(folder_state(out)) == {"a", "b", "c", "e", "f"}  # debris of the killed run removed
    assert not (out / ".render.lock").exists()  # a finished batch leaves only its own files
    for job in (j for j in m["jobs"] if j["outcome"] == "done"):  # first_sound is a moment: the earliest take's
        t = job.get("timings_s") or {}
        assert "first_sound" not in t or t["first_sound"] <= t["total"], job
    assert a_wav.stat().st_mtime_ns == a_stat.st_mtime_ns and a_wav.stat().st_ino == a_stat.st_ino
    assert_complete(out, "b", 4)
    rec_c = assert_complete(out, "c", 2)
    assert all(set(t["files"]) == {"wav", "flac", "json"} for t in rec_c["takes"])
    assert "line 3 (id 'bad'): keys: unknown key(s) ['colour']" in err and "line 6 (id 'd'): id:" in err

    # 4. Every good job complete and unchanged: nothing renders, no worker starts, exit 0.
    good = tmp / "good.jsonl"
    good.write_text("\n".join(json.dumps(j) for j in jobs_lines(5.0) if j["id"] in "aebc") + "\n")
    code, summary, err = Run(tmp, good, "--resume").wait()
    assert code == 0 and summary["ok"] and summary["counts"] == {"skipped": 4}, err[-2000:]
    assert "starting" not in err and "4 job(s) complete and unchanged, skipped; 0 to render" in err

    # The studio's store saw every render of every run.
    from studio.store import Store

    store = Store(tmp / "data")
    session = next(s for s in store.list_sessions() if s.title == "Overnight")
    takes = store.list_takes(session.id)
    by_job: dict[str, list[Any]] = {}
    for t in takes:
        by_job.setdefault(t.request["render_id"], []).append(t)
    assert [t.status for t in by_job["a"]] == ["done"]
    assert [t.status for t in by_job["e"]] == ["done", "done"]
    assert len(by_job["f"]) >= 2 and {t.status for t in by_job["f"]} == {"failed"} and "TEST MODE" in by_job["f"][0].error
    b_status = [t.status for t in by_job["b"]]
    assert b_status[:4] == ["cancelled"] * 4 and b_status[-4:] == ["done"] * 4
    assert set(b_status[4:8]) == {"interrupted"}  # the SIGKILLed run's takes, recovered by run 3
    for t in by_job["b"][-4:] + by_job["c"][-2:]:
        assert t.file("wav") is not None and t.file("wav").is_file() and t.record["seed"] == t.seed
        assert t.file("wav").parent == out / t.request["render_id"]
    store.close()


def _kill_and_reap(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    for _ in range(200):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)


def test_one_song_form_writes_the_named_file_and_its_record(batch_dir: Path) -> None:
    tmp = batch_dir
    env = {**os.environ, "DRS_LOCK_DIR": str(tmp / "locks"), "STUDIO_LOG_LEVEL": "WARNING"}
    song = tmp / "songs" / "night.flac"
    argv = [sys.executable, "-m", "studio.cli", "render", "--lyrics", str(tmp / "words" / "a.lrc"), "--style",
            "lofi, rain", "--duration", "95", "--steps", "4", "--seed", "3", "-o", str(song), "--model", "test",
            "--test-crop-frames", str(CROP), "--threads", "1", "--data-dir", str(tmp / "data"),
            "--session", "Singles", "--quiet", "--json"]
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stderr == ""  # --quiet: no progress
    summary = json.loads(proc.stdout)
    assert summary["files"] == {"flac": str(song), "json": str(song.with_suffix(".json"))}
    assert sorted(p.name for p in song.parent.iterdir()) == ["night.flac", "night.json"]  # no hidden leftovers
    record = json.loads(song.with_suffix(".json").read_text())
    assert record["seed"] == 3 and record["files"] == {"flac": "night.flac"}
    assert record["request"]["lyrics"] == LRC and record["request"]["style"]["text"] == "lofi, rain"
    audio, rate = sf.read(song, dtype="int16")
    assert rate == 44100 and audio.shape == (CROP * 2048, 2)

    from studio.store import Store

    store = Store(tmp / "data")
    session = next(s for s in store.list_sessions() if s.title == "Singles")
    (take,) = store.list_takes(session.id)
    assert take.status == "done" and take.seed == 3 and take.file("flac") == song
    store.close()
