"""`RemoteDiT` / `RemoteVae`, the public drop-ins for upstream-style calling code, and the example that uses them.

What these tests pin: `RemoteDiT` is the sampler's `Backbone` and a torch module (so `cfm.transformer = ...`
is accepted); the sampler through it equals the sampler on the in-process DiT bit for bit (with a stand-in
worker that runs the DiT in this process, and with a real worker process); `RemoteVae` decodes to the
in-process bytes; examples/upstream_style.py runs against a real worker, both as functions and as the
script a user runs. Every wait has a deadline; the worker fixture leaves no process behind.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from _worker_util import EXACT, Song, reference

from device_worker.model.load import load_dit
from device_worker.model.sampling import Backbone, sample
from device_worker.protocol import SongParams
from engine.remote_dit import RemoteDiT, RemoteVae
from engine.worker_client import Worker

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "upstream_style.py"
SONG = Song(frames=64, steps=6)  # 5 guided steps, 3 VAE windows


@pytest.fixture(scope="module")
def worker(paths, tmp_path_factory):
    w = Worker(dit=paths[0], vae=paths[1], threads=1, lock_dir=str(tmp_path_factory.mktemp("lock")),
               precision=EXACT)
    with w:
        w.wait_ready(60)
        yield w
    assert w.proc is not None and w.proc.poll() is not None, "close() must leave no process"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("upstream_style", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class InProcessWorker:
    """What RemoteDiT needs of a Worker (`ready.info`, `forward`), answered by a DiT in this process the way
    the torch backend answers FORWARD."""

    def __init__(self, dit) -> None:
        from device_worker.backends import make_backend

        self.backend = make_backend("torch", "cpu")
        self.backend.dit = dit
        self.ready = SimpleNamespace(info={"dit.mel_dim": "64", "dit.max_frames": str(dit.config.max_frames),
                                           "dit.duration_embed": str(int(dit.config.duration_embed)),
                                           "dit.dtype": "float32", "dit.state_dtype": "float32"})
        self.calls = 0

    def forward(self, tensors, *, drop_audio_cond, drop_text, drop_prompt, timeout_s):
        self.calls += 1
        return self.backend.forward(tensors, drop_audio_cond, drop_text, drop_prompt)


def _song(song: Song, **settings) -> dict:
    text, style, neg = song.inputs()
    return dict(text=torch.from_numpy(text)[None], style=torch.from_numpy(style)[None],
                negative_style=torch.from_numpy(neg)[None], duration=song.frames,
                params=SongParams(steps=song.steps, cfg=song.cfg, seed=song.seed, **settings))


def test_remote_dit_is_a_backbone_and_a_torch_module(tiny_dit_full: Path) -> None:
    import engine.remote_dit

    dit = load_dit(tiny_dit_full)
    remote = RemoteDiT(InProcessWorker(dit))
    assert RemoteDiT is engine.remote_dit.RemoteDiT and RemoteDiT.__name__ == "RemoteDiT"
    assert isinstance(remote, Backbone) and isinstance(dit, Backbone)
    assert isinstance(remote, torch.nn.Module)
    assert remote.device == torch.device("cpu") and remote.state_dtype == torch.float32
    assert (remote.config.mel_dim, remote.config.max_frames, remote.config.duration_embed) == (64, 6144, True)
    holder = torch.nn.Module()
    holder.transformer = dit
    holder.transformer = remote  # what upstream code does with `cfm.transformer`: a module may replace a module
    with pytest.raises(RuntimeError, match="does not describe its DiT"):
        RemoteDiT(SimpleNamespace(ready=SimpleNamespace(info={"torch": "2"})))


def test_sampler_through_remote_dit_equals_the_in_process_dit(tiny_dit_full: Path) -> None:
    dit = load_dit(tiny_dit_full)
    song = Song(frames=48, steps=4)
    fake = InProcessWorker(dit)
    got = sample(RemoteDiT(fake), **_song(song, start_time=2.0))
    assert torch.equal(got, sample(dit, **_song(song, start_time=2.0)))
    assert fake.calls == song.steps - 1  # one FORWARD per guided step (both branches in one batch)


def test_remote_dit_drives_the_sampler_like_the_model_core(worker, paths) -> None:
    prev = torch.get_num_threads()
    try:
        lat = sample(RemoteDiT(worker), **_song(SONG))
    finally:
        torch.set_num_threads(prev)
    assert torch.equal(lat[0], torch.from_numpy(reference(SONG, *paths)[0]))


def test_remote_vae_decodes_in_windows_on_the_worker(worker, paths) -> None:
    latent, audio = reference(SONG, *paths)
    out = RemoteVae(worker, window=SONG.window, overlap=SONG.overlap).decode(torch.from_numpy(latent).T[None])
    assert isinstance(out, torch.Tensor) and tuple(out.shape) == (1, 2, SONG.frames * 2048)
    assert np.array_equal(out[0].numpy(), audio)


def test_the_upstream_style_example_equals_the_model_core(worker, paths, example) -> None:
    text, style, neg = SONG.inputs()
    inputs = {"text": text, "style": style, "negative_style": neg}
    latent, audio = example.make_song(worker, inputs, steps=SONG.steps, cfg_strength=SONG.cfg, seed=SONG.seed,
                                      window=SONG.window, overlap=SONG.overlap)
    want_latent, want_audio = reference(SONG, *paths)
    assert np.array_equal(latent, want_latent)
    assert np.array_equal(audio, want_audio), f"max diff {np.abs(audio - want_audio).max()}"


def test_the_upstream_style_example_runs_as_a_script(worker, paths, example, reference_dir, tmp_path) -> None:
    out = tmp_path / "song.npz"
    argv = [sys.executable, str(EXAMPLE), "--dit", paths[0], "--vae", paths[1], "--negative-style",
            str(reference_dir / "vocal.npy"), "--frames", "40", "--steps", "3", "--window", "32", "--overlap", "8",
            "--threads", "1", "--precision", EXACT, "--out", str(out)]
    run = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr[-3000:]
    line = json.loads(run.stdout.strip().splitlines()[-1])
    assert line["out"] == str(out) and line["audio_samples"] == 40 * 2048
    with np.load(out) as f:  # allow_pickle stays False
        saved = {k: f[k] for k in f.files}
    assert set(saved) == {"text", "style", "negative_style", "latent", "audio"}
    assert saved["latent"].shape == (40, 64) and saved["audio"].shape == (2, 40 * 2048)
    # the script's song is the functions' song: same inputs, same worker settings, same bytes
    latent, audio = example.make_song(worker, {k: saved[k] for k in ("text", "style", "negative_style")}, steps=3,
                                      cfg_strength=4.0, seed=1, window=32, overlap=8)
    assert np.array_equal(saved["latent"], latent) and np.array_equal(saved["audio"], audio)
