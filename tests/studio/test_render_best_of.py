"""`studio render` and the lyrics check: every sung take's check in render.json and the manifest,
`"best_of": N` / `--best-of N` (N variations, all kept, the lowest PER named as the pick; the one-song
form delivers the pick), and the line problems of a bad best_of. Real `studio render` processes on the
test model, whose tiny random Whisper hears nothing meaningful: the pick is checked against the PERs the
run recorded, not against the music."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from studio.render.jobs import parse_jobs
from studio.render.pick import pick

ROOT = Path(__file__).resolve().parents[2]
LRC = "[00:01.00]hello neon night\n[00:04.00]goodbye moon\n[00:07.00]\n"


def render(tmp: Path, *args: str) -> tuple[int, dict]:
    env = {**os.environ, "DRS_LOCK_DIR": str(tmp / "locks"), "STUDIO_LOG_LEVEL": "WARNING"}
    proc = subprocess.run([sys.executable, "-m", "studio.cli", "render", *args, "--model", "test",
                           "--test-crop-frames", "180", "--threads", "1", "--data-dir", str(tmp / "data"), "--json"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.stdout, proc.stderr[-2000:]
    return proc.returncode, json.loads(proc.stdout)


def test_best_of_renders_checks_keeps_all_and_picks_the_lowest_per(tmp_path: Path) -> None:
    (tmp_path / "a.lrc").write_text(LRC)
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text("\n".join(json.dumps(j) for j in [
        {"id": "best", "lyrics": "a.lrc", "style": "pop", "duration": 95, "steps": 3, "seed": 3, "best_of": 3},
        {"id": "plain", "lyrics": "a.lrc", "style": "pop", "duration": 95, "steps": 3, "seed": 9},
        {"id": "inst", "style": "pop", "duration": 95, "steps": 3, "seed": 9},
    ]) + "\n")
    code, summary = render(tmp_path, str(jobs), "-o", str(tmp_path / "out"))
    assert code == 0, summary
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    by_id = {j["id"]: j for j in manifest["jobs"]}
    best = by_id["best"]
    assert len(best["files"]) == 3 and len(best["lyrics_check"]) == 3  # all three kept, each checked
    pers = [c["per"] for c in best["lyrics_check"]]
    assert all(p is not None for p in pers) and all(c["model"].startswith("whisper") for c in best["lyrics_check"])
    assert best["pick"]["take"] == min(range(3), key=lambda k: (pers[k], k)) and best["pick"]["per"] == min(pers)
    rec = json.loads((tmp_path / "out" / "best" / "render.json").read_text())
    assert rec["pick"] == best["pick"] and [t["lyrics_check"]["per"] for t in rec["takes"]] == pers
    take_record = json.loads((tmp_path / "out" / "best" / rec["takes"][0]["files"]["json"]).read_text())
    assert take_record["lyrics_check"]["per"] == pers[0] and len(take_record["lyrics_check"]["lines"]) == 2
    assert "pick" not in by_id["plain"] and by_id["plain"]["lyrics_check"][0]["per"] is not None
    assert by_id["inst"]["lyrics_check"] == [None]  # instrumental: not checked

    out = tmp_path / "song.wav"  # the one-song form with --best-of: -o gets the pick
    code, summary = render(tmp_path, "--lyrics", str(tmp_path / "a.lrc"), "--style", "pop", "--duration", "95",
                           "--steps", "3", "--seed", "5", "--best-of", "2", "-o", str(out))
    assert code == 0, summary
    record = json.loads(out.with_suffix(".json").read_text())
    assert out.is_file() and "lyrics_check" in record


def test_best_of_line_problems(tmp_path: Path) -> None:
    text = "\n".join(json.dumps(j) for j in [
        {"id": "a", "style": "s", "duration": 95, "best_of": 40},
        {"id": "b", "style": "s", "duration": 95, "best_of": 2, "variations": 3},
        {"id": "c", "style": "s", "duration": 95, "best_of": "two"},
        {"id": "d", "style": "s", "duration": 95},
    ])
    parsed = parse_jobs(text, tmp_path, best_of=4)
    fields = {(p.job_id, p.field) for p in parsed.problems}
    assert fields == {("a", "best_of"), ("b", "best_of"), ("c", "best_of")}
    (d,) = parsed.jobs
    assert d.best_of == 4 and d.request.variations == 4  # --best-of for the lines without their own
    assert pick([{"take": 0, "lyrics_check": {"per": 0.5}}, {"take": 1, "lyrics_check": {"per": 0.2}},
                 {"take": 2, "lyrics_check": {"per": 0.2}}])["take"] == 1
    assert pick([{"take": 0, "lyrics_check": None}])["take"] is None
