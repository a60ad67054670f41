"""The test model's files on a fresh machine: two writers at once (two studios started together, or two
test workers) each write a private copy and rename it into place, so neither reads a half-written folder
and nothing is left beside it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from studio.testmodel import ensure_test_models


def test_two_writers_at_once_leave_one_complete_folder(tmp_path: Path) -> None:
    root = tmp_path / "cache" / "test-model"
    writers = [subprocess.Popen([sys.executable, "-m", "studio.testmodel", str(root)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for _ in range(2)]
    for w in writers:
        _, err = w.communicate(timeout=180)
        assert w.returncode == 0, err.decode()[-2000:]
    assert sorted(p.name for p in root.parent.iterdir()) == ["test-model"]  # no partial copy left beside it
    models = ensure_test_models(root)  # complete: read as it is, not written again
    for path in (models.vae, Path(models.base) / "cfm_model.pt", Path(models.full) / "config.json",
                 models.negative_style, models.vocab, Path(models.lyrics) / "config.json"):
        assert Path(path).is_file(), path
