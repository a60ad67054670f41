"""Two `studio serve` (two data folders) and a `studio render` on one machine, all making songs at once
on CPU workers, with the default lock folder: the CPU is shared, only cards are exclusive."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from studio_helpers import LRC, ROOT, ServeProcess, form


def test_two_studios_and_a_render_make_songs_side_by_side(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("DRS_LOCK_DIR", raising=False)  # the default lock folder, as a musician has it
    studios = [ServeProcess(tmp_path / f"data{i}", tmp_path, "--test-crop-frames", "64") for i in (1, 2)]
    try:
        clients = [s.wait_ready() for s in studios]
        jobs = [c.predict(form(title=f"Studio {i}", steps=8), "", api_name="/submit") for i, c in enumerate(clients)]
        (tmp_path / "a.lrc").write_text(LRC, encoding="utf-8")
        song = tmp_path / "out" / "beside.wav"
        render = subprocess.Popen(
            [sys.executable, "-m", "studio.cli", "render", "--lyrics", str(tmp_path / "a.lrc"), "--style", "lofi",
             "--duration", "95", "--steps", "8", "-o", str(song), "--model", "test", "--test-crop-frames", "64",
             "--threads", "1", "--data-dir", str(tmp_path / "data3"), "--quiet"],
            cwd=ROOT, env={k: v for k, v in os.environ.items() if k != "DRS_LOCK_DIR"},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for c, job in zip(clients, jobs, strict=True):
            final = list(c.submit(job["takes"][0], api_name="/follow"))[-1]
            assert final["status"] == "done", final
        out, err = render.communicate(timeout=240)
        assert render.returncode == 0, err[-2000:]
        assert song.is_file() and song.stat().st_size > 0
    finally:
        for s in studios:
            s.stop()
