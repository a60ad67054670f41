"""A real worker process with `--backend ttnn` (on the ttnn stand-in, injected into that process only):
READY reports the warm shapes, a song streams its steps, latent and windows, close() leaves no process."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from ttnn_fixtures import CARD_CFG, random_dit, reference_song, save_checkpoint, song_spec

from device_worker.model.load import load_dit
from engine.worker_client import Worker

TESTS = Path(__file__).resolve().parents[1]


def test_worker_process_runs_a_song_on_the_ttnn_backend(tiny_vae: Path, tmp_path: Path) -> None:
    ckpt = save_checkpoint(random_dit(41, **CARD_CFG), tmp_path / "dit")
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(  # test-only: this worker process sees the stand-in as `ttnn`
        f"import sys\nsys.path.insert(0, {str(TESTS)!r})\nimport fake_ttnn\nfake_ttnn.core.EXACT = True\nsys.modules['ttnn'] = fake_ttnn\n")
    import os

    env = dict(os.environ, PYTHONPATH=str(site), DRS_TTNN_CACHE=str(tmp_path / "cache"), DRS_TTNN_VAE_WINDOWS="16")
    w = Worker(dit=str(ckpt), vae=str(tiny_vae), backend="ttnn", device="0", env=env,
               lock_dir=str(tmp_path / "locks"))
    try:
        w.start()
        ready = w.wait_ready(120)
        assert ready.info["warm_shapes"] == "vae:16x1" and ready.info["grid"] == "11x10"
        assert "mm=HiFi4" in ready.info["ttnn.precision"]
        spec = song_spec(n=120)
        job = w.submit(spec.text, spec.style, spec.negative_style, song=spec.song,
                       decode_window=16, decode_overlap=4)
        kinds, latent, windows = [], None, []
        for ev in job.events(timeout_s=300, event_timeout_s=120):
            kinds.append(ev.kind)
            if ev.kind == "latent":
                latent = next(iter(ev.tensors.values()))
            elif ev.kind == "window":
                windows.append(next(iter(ev.tensors.values())))
        assert kinds[0] == "accepted" and kinds.count("step") == spec.song.steps - 1 and kinds[-1] == "done", kinds
        want = reference_song(load_dit(ckpt), spec)
        assert np.abs(latent - want.numpy()).max() <= 1e-4 * np.abs(latent).max()
        assert len(windows) == 10 and sum(b.shape[-1] for b in windows) == 120 * 2048
        assert torch.isfinite(torch.from_numpy(np.concatenate(windows, -1))).all()
    finally:
        code = w.close()
    assert w.proc is not None and w.proc.poll() is not None, f"worker still running (exit {code})"


def test_a_card_serves_one_worker_and_the_second_says_who_holds_it(tiny_vae: Path, tmp_path: Path) -> None:
    """A Tenstorrent card (or a GPU) is exclusive: the second worker exits at once, and its own reason
    (the lock and the pid holding it) is the first line of what the engine reports."""
    import os

    import pytest

    from engine.worker_client import WorkerDeadError

    ckpt = save_checkpoint(random_dit(41, **CARD_CFG), tmp_path / "dit")
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        f"import sys\nsys.path.insert(0, {str(TESTS)!r})\nimport fake_ttnn\nsys.modules['ttnn'] = fake_ttnn\n")
    env = dict(os.environ, PYTHONPATH=str(site), DRS_TTNN_CACHE=str(tmp_path / "cache"), DRS_TTNN_VAE_WINDOWS="16")
    first = Worker(dit=str(ckpt), vae=str(tiny_vae), backend="ttnn", device="0", env=env, lock_dir=str(tmp_path))
    second = Worker(dit=str(ckpt), vae=str(tiny_vae), backend="ttnn", device="0", env=env, lock_dir=str(tmp_path))
    try:
        first.start()
        first.wait_ready(120)
        second.start()
        with pytest.raises(WorkerDeadError) as err:
            second.wait_ready(60)
        line = str(err.value).splitlines()[0]
        assert f"another worker (pid {first.proc.pid}) holds" in line and "one worker per device" in line, line
        assert second.proc.poll() == 2
    finally:
        second.close()
        first.close()
