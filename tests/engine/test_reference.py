"""engine.reference: reference songs of every format and length through the tiny VAE; segments."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

os.environ["HF_HUB_OFFLINE"] = "1"

from device_worker.shapes import HOP  # noqa: E402
from engine.audio_files import AudioFileError  # noqa: E402
from engine.reference import (  # noqa: E402
    ReferenceError,
    fit_latent,
    load_reference_audio,
    plan_edit,
    plan_edit_frames,
    segments_to_frames,
)

TARGET = 40  # frames (1.86 s): the tiny VAE on CPU costs ~1 s per second of audio


def song(seconds: float, rate: int, channels: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(round(seconds * rate))) / rate
    x = np.stack([0.4 * np.sin(2 * np.pi * (220 + 110 * c) * t) for c in range(channels)], axis=1)
    return (x + 0.02 * rng.standard_normal(x.shape)).astype(np.float32)



def local_vae_encoder(vae_path: str | Path) -> Callable[[np.ndarray, int], np.ndarray]:
    """In-process encoder over `device_worker` (the tests'; the studio uses the worker's VAE)."""
    import torch

    from device_worker.model.vae import draw_latent, load_vae

    vae = load_vae(vae_path)

    def encode(audio: np.ndarray, seed: int) -> np.ndarray:
        encoded = vae.encode(torch.from_numpy(audio))  # [1, 128, T] mean || scale
        return draw_latent(encoded, seed).numpy()  # [1, 64, T]

    return encode


@pytest.fixture(scope="module")
def encode(tiny_vae):
    return local_vae_encoder(tiny_vae)


def upstream_frames(segments, max_frames):
    """A literal restatement of upstream get_reference_latent's loop (infer/infer_utils.py)."""
    out = []
    for st, et in segments:
        sf_ = 0 if st == -1 else int(st * 44100 / 2048)
        ef = max_frames if et == -1 else int(et * 44100 / 2048)
        out.append((sf_, ef))
    return out


@pytest.mark.parametrize("segments", [[[-1, 41], [70, -1]], [[0.5, 10.25]], [[3.3, 3.4]], [[95.0, -1]],
                                      [[12.0, 283.9]], [[0.0464, 1.0]]])
@pytest.mark.parametrize("max_frames", [2048, 6144])
def test_segments_match_upstream(segments, max_frames):
    assert segments_to_frames(segments, max_frames) == upstream_frames(segments, max_frames)


def test_bad_segments_are_refused():
    for seg, msg in (([[5, 5]], "empty"), ([[-2, 4]], ">= 0 seconds or -1"), ([[1, 2, 3]], r"\[start, end\]"),
                     ([[10, 2]], "empty")):
        with pytest.raises(ReferenceError, match=msg):
            segments_to_frames(seg, 2048)


@pytest.mark.parametrize("fmt,ext", [("WAV", "wav"), ("FLAC", "flac"), ("OGG", "ogg"), ("MP3", "mp3")])
def test_every_format_through_the_tiny_vae(tmp_path, encode, fmt, ext):
    path = tmp_path / f"ref.{ext}"
    sf.write(path, song(1.0, 48_000, 1), 48_000, format=fmt)  # mono 48 kHz -> stereo 44.1 kHz
    audio = load_reference_audio(path)
    assert audio.shape[0] == 2 and np.array_equal(audio[0], audio[1])
    assert abs(audio.shape[1] - 44_100) <= 1200 and abs(np.abs(audio).max() - 10 ** (-6 / 20)) < 1e-6
    plan = plan_edit_frames(path, frames=TARGET, max_frames=TARGET, segments=None, encode=encode, seed=1)
    assert plan.cond.shape == (TARGET, 64)
    used = -(-audio.shape[1] // HOP)
    assert np.all(plan.cond[used:] == 0) and np.abs(plan.cond[: used - 1]).sum() > 0
    assert plan.segments == [(int(plan.reference_s * 44100 / 2048), TARGET)]
    assert "padded with zeros" in plan.notes[0]


@pytest.mark.parametrize("samples,note", [(TARGET * HOP - 30_000, "padded"), (TARGET * HOP, None),
                                          (TARGET * HOP + 40_000, "dropped")])
def test_shorter_equal_longer_than_the_target(tmp_path, encode, samples, note):
    path = tmp_path / "ref.wav"
    sf.write(path, song(samples / 44_100, 44_100, 3), 44_100)  # 3 channels: the third is dropped
    plan = plan_edit_frames(path, frames=TARGET, max_frames=TARGET, segments=[[0.5, 1.0]], encode=encode, seed=0)
    assert plan.cond.shape == (TARGET, 64) and plan.cond.dtype == np.float32
    assert plan.segments == [(10, 21)]
    assert (plan.notes[0] if plan.notes else None) is None if note is None else note in plan.notes[0]
    again = plan_edit_frames(path, frames=TARGET, max_frames=TARGET, segments=[[0.5, 1.0]], encode=encode, seed=0)
    assert np.array_equal(plan.cond, again.cond)  # same seed, same latent draw


def test_song_lengths_use_the_model_frame_budget(tmp_path):
    sf.write(tmp_path / "ref.flac", song(2.0, 22_050, 2), 22_050)
    calls = []

    def fake_encode(audio, seed):  # shape-only stand-in; the real VAE is exercised above
        calls.append(audio.shape)
        return np.ones((1, 64, -(-audio.shape[2] // HOP)), np.float32)

    base = plan_edit(tmp_path / "ref.flac", duration_s=95, segments=[[-1, 41], [70, -1]], encode=fake_encode)
    assert base.cond.shape == (2048, 64) and base.segments == [(0, 882), (1507, 2048)]
    full = plan_edit(tmp_path / "ref.flac", duration_s=130, segments=None, encode=fake_encode)
    assert full.cond.shape == (2799, 64) and full.segments == [(43, 6144)]  # continuation from 2.0 s
    assert calls[0] == (1, 2, 88_200)
    with pytest.raises(ValueError, match="not supported"):
        plan_edit(tmp_path / "ref.flac", duration_s=60, segments=None, encode=fake_encode)


def test_bad_reference_files(tmp_path):
    (tmp_path / "junk.wav").write_bytes(b"RIFF" + os.urandom(200))
    with pytest.raises(AudioFileError, match="cannot read junk.wav"):
        load_reference_audio(tmp_path / "junk.wav")
    sf.write(tmp_path / "silent.wav", np.zeros((4410, 2), np.float32), 44_100)
    with pytest.raises(ReferenceError, match="silent"):
        load_reference_audio(tmp_path / "silent.wav")
    with pytest.raises(ReferenceError, match=r"\[T, 64\]"):
        fit_latent(np.zeros((5, 32), np.float32), 10)
