"""engine.style + engine.audio_files: window choice, cache, named styles, odd audio, negative style."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest
import soundfile as sf

os.environ["HF_HUB_OFFLINE"] = "1"

from tiny_mulan import LocalStyleEncoder, local_encoder_from_models, write_tiny_mulan  # noqa: E402

from device_worker.audio import resample, resampled_length  # noqa: E402
from engine.audio_files import AudioFileError, probe  # noqa: E402
from engine.style import (  # noqa: E402
    StyleError,
    StyleLibrary,
    StyleService,
    as_model_input,
    choose_window,
    load_negative_style,
    style_window,
)


def tone(seconds: float, rate: int, channels: int = 2, freq: float = 440.0, seed: int = 0) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    rng = np.random.default_rng(seed)
    x = 0.3 * np.sin(2 * np.pi * freq * t) + 0.01 * rng.standard_normal(t.shape)
    return np.repeat(x[:, None], channels, axis=1).astype(np.float32)


class Counting:
    def __init__(self, inner):
        self.inner, self.model_id, self.calls = inner, inner.model_id, 0

    def embed_text(self, texts):
        self.calls += 1
        return self.inner.embed_text(texts)

    def embed_audio(self, wavs):
        self.calls += 1
        return self.inner.embed_audio(wavs)


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    p = write_tiny_mulan(tmp_path_factory.mktemp("mulan"))
    return LocalStyleEncoder(p["mulan"], muq_config=p["muq_config"], text_dir=p["text"])


def test_window_choice_matches_upstream():
    assert choose_window(30.7) == (10.0, 10.0, [])  # 30.7 // 2 - 5 = 10
    assert choose_window(10.0) == (0.0, 10.0, [])
    assert choose_window(13.99) == (1.0, 10.0, [])
    assert choose_window(1200.0)[:2] == (595.0, 10.0)
    for short in (9.999, 3.0, 0.0, float("nan")):  # upstream asserts >= 10 s
        with pytest.raises(StyleError, match="at least 10 s"):
            choose_window(short)


def test_resampled_length_is_librosas():
    # int(ceil(n * (dst / src))): the ratio in floating point first, as librosa, so 10 s at 44.1 kHz
    # gives one sample more than the exact 240000 (and MuQ-MuLan then embeds two clips)
    assert resampled_length(441_000, 44_100, 24_000) == 240_001
    assert resampled_length(220_500, 22_050, 24_000) == 240_001
    assert resampled_length(480_000, 48_000, 24_000) == 240_000
    assert resampled_length(80_000, 8_000, 24_000) == 240_000
    for rate in (8_000, 16_000, 22_050, 32_000, 44_100, 48_000, 96_000):
        x = tone(1.0, rate, channels=1)[:, 0]
        y = resample(x, rate, 24_000)
        assert y.dtype == np.float32 and y.shape == (resampled_length(rate, rate, 24_000),)
    x = tone(2.0, 44_100)
    y = resample(x, 44_100, 24_000)  # [n, ch]: each channel on its own, as librosa
    assert y.shape == (48_001, 2) and np.array_equal(y[:, 1], resample(x[:, 1], 44_100, 24_000))
    assert resample(x, 24_000, 24_000) is not None and np.array_equal(resample(x, 24_000, 24_000), x)


def test_window_is_read_as_librosa_reads_it(tmp_path):
    """int(offset * rate) / int(10 * rate) frames, channel mean, soxr_hq to 24 kHz (no librosa here:
    the same steps spelled out with soundfile + soxr)."""
    import soxr

    rate = 44_100
    rng = np.random.default_rng(5)
    x = (0.2 * rng.standard_normal((int(23.5 * rate), 3))).astype(np.float32)
    sf.write(tmp_path / "three.wav", x, rate, subtype="FLOAT")
    w = style_window(tmp_path / "three.wav")
    assert (w.start_s, w.duration_s, w.source_s) == (6.0, 10.0, 23.5)  # 23.5 // 2 - 5
    span = x[6 * rate : 16 * rate]
    mono = np.mean(span.T, axis=0)
    y = soxr.resample(mono, rate, 24_000, quality="soxr_hq")
    want = np.pad(y, (0, max(0, 240_001 - len(y))))[:240_001]  # librosa's fix_length: zero-pad or cut
    assert w.samples.shape == (240_001,) and np.array_equal(w.samples, want)


def test_text_style_end_to_end_and_cache(encoder, tmp_path):
    enc = Counting(encoder)
    svc = StyleService(enc, tmp_path / "cache", model_id=enc.model_id)
    a = svc.from_text("  dreamy synth pop ")
    b = svc.from_text("dreamy synth pop")
    assert (a.cached, b.cached, enc.calls) == (False, True, 1)
    assert a.vector.shape == (512,) and np.array_equal(a.vector, b.vector)
    assert abs(np.linalg.norm(a.vector) - 1) < 1e-5
    c = svc.from_text("angry metal")
    assert not c.cached and enc.calls == 2 and not np.allclose(a.vector, c.vector)
    fresh = StyleService(Counting(encoder), tmp_path / "cache", model_id=encoder.model_id)  # cache lives on disk
    assert fresh.from_text("dreamy synth pop").cached
    with pytest.raises(StyleError, match="empty"):
        svc.from_text("   ")
    model_in = as_model_input(a.vector)
    assert model_in.shape == (1, 512) and np.array_equal(model_in, model_in.astype(np.float16).astype(np.float32))


def test_audio_style_end_to_end_window_and_cache(encoder, tmp_path):
    x = tone(30.0, 44_100)
    x[int(10 * 44_100) : int(20 * 44_100)] *= 2.0  # the central window is louder than the rest
    sf.write(tmp_path / "song.wav", x, 44_100)
    enc = Counting(encoder)
    svc = StyleService(enc, tmp_path / "cache", model_id=enc.model_id)
    r = svc.from_audio(tmp_path / "song.wav")
    assert r.window.start_s == 10.0 and r.window.samples.shape == (240_001,) and r.notes == []
    assert 0.5 < np.abs(r.window.samples).max() < 0.7  # from the loud (central) part only
    assert abs(np.linalg.norm(r.vector) - 1) < 1e-5
    assert svc.from_audio(tmp_path / "song.wav").cached and enc.calls == 1
    shutil.copy(tmp_path / "song.wav", tmp_path / "copy.wav")  # same samples, other name: same key
    assert svc.from_audio(tmp_path / "copy.wav").cached
    sf.write(tmp_path / "other.wav", tone(30.0, 44_100, freq=220.0), 44_100)
    assert not svc.from_audio(tmp_path / "other.wav").cached and enc.calls == 2


@pytest.mark.parametrize("fmt,ext", [("WAV", "wav"), ("FLAC", "flac"), ("OGG", "ogg"), ("MP3", "mp3")])
def test_every_format_gives_the_24k_window(tmp_path, fmt, ext):
    path = tmp_path / f"ref.{ext}"
    sf.write(path, tone(12.0, 48_000), 48_000, format=fmt)
    w = style_window(path)
    assert w.start_s == 1.0 and abs(w.samples.shape[0] - 240_000) <= 2400  # MP3 frame rounding
    assert w.samples.dtype == np.float32 and np.abs(w.samples).max() > 0.1


def test_short_references_are_refused_and_mono_8k_10s_is_used(encoder, tmp_path):
    sf.write(tmp_path / "short.wav", tone(3.0, 8_000, channels=1), 8_000)
    with pytest.raises(StyleError, match=r"3\.00 s long; .*at least 10 s"):
        StyleService(encoder, tmp_path / "c", model_id=encoder.model_id).from_audio(tmp_path / "short.wav")
    sf.write(tmp_path / "ten.wav", tone(10.0, 8_000, channels=1), 8_000)
    r = StyleService(encoder, tmp_path / "c", model_id=encoder.model_id).from_audio(tmp_path / "ten.wav")
    assert r.window.samples.shape == (240_000,) and (r.window.start_s, r.window.duration_s) == (0.0, 10.0)
    assert r.notes == [] and r.vector.shape == (512,) and np.isfinite(r.vector).all()


def test_twenty_minute_file_reads_only_the_central_window(tmp_path):
    rate, path = 8_000, tmp_path / "long.wav"
    with sf.SoundFile(path, "w", rate, 1, "PCM_16") as f:  # 20 min of silence, a tone at 595-605 s
        block = np.zeros(rate * 60, dtype=np.float32)
        for minute in range(20):
            if minute == 9:
                b = block.copy()
                b[35 * rate :] = tone(25.0, rate, channels=1)[:, 0]
                f.write(b)
            elif minute == 10:
                b = block.copy()
                b[: 5 * rate] = tone(5.0, rate, channels=1)[:, 0]
                f.write(b)
            else:
                f.write(block)
    assert probe(path).duration_s == 1200.0
    w = style_window(path)
    assert (w.start_s, w.source_s) == (595.0, 1200.0) and w.samples.shape == (240_000,)
    assert np.abs(w.samples[1000:-1000]).min() < 0.35 and np.sqrt(np.mean(w.samples[1000:-1000] ** 2)) > 0.15


def test_corrupt_and_misnamed_files(tmp_path):
    (tmp_path / "noise.wav").write_bytes(os.urandom(4096))
    with pytest.raises(AudioFileError, match="cannot read noise.wav as audio"):
        style_window(tmp_path / "noise.wav")
    (tmp_path / "notes.mp3").write_text("this is not an mp3\n" * 50)
    with pytest.raises(AudioFileError, match="cannot read notes.mp3"):
        style_window(tmp_path / "notes.mp3")
    with pytest.raises(AudioFileError, match="does not exist"):
        style_window(tmp_path / "absent.flac")
    sf.write(tmp_path / "real.flac", tone(11.0, 22_050), 22_050)  # FLAC content named .mp3: read by content
    shutil.copy(tmp_path / "real.flac", tmp_path / "misnamed.mp3")
    assert style_window(tmp_path / "misnamed.mp3").samples.shape == (240_001,)  # librosa's length rule
    sf.write(tmp_path / "tiny.wav", tone(1.0, 8_000), 8_000)
    with pytest.raises(StyleError, match="1.00 s long"):
        style_window(tmp_path / "tiny.wav")


def test_named_styles_round_trip(tmp_path):
    lib = StyleLibrary(tmp_path / "styles")
    v = np.random.default_rng(0).standard_normal(512).astype(np.float32)
    lib.save("Dream Pop-1", v)
    assert lib.names() == ["Dream Pop-1"]
    assert np.array_equal(lib.load("Dream Pop-1"), v)
    assert np.load(tmp_path / "styles" / "Dream Pop-1.npy").shape == (512,)
    with pytest.raises(StyleError, match="already exists"):
        lib.save("Dream Pop-1", v)
    lib.save("Dream Pop-1", -v, overwrite=True)
    assert np.array_equal(lib.load("Dream Pop-1"), -v)
    for bad in ("../escape", "", "a/b", ".hidden"):
        with pytest.raises(StyleError, match="not allowed"):
            lib.save(bad, v)
    np.save(tmp_path / "styles" / "short.npy", np.zeros(10, np.float32))
    with pytest.raises(StyleError, match="512-d"):
        lib.load("short")
    with pytest.raises(StyleError, match="no saved style"):
        lib.load("absent")
    lib.delete("Dream Pop-1")
    assert lib.names() == ["short"]


def test_negative_style_is_a_model_file(tmp_path, reference_dir, monkeypatch):
    from engine.modelfiles import ModelFileMissing

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("STUDIO_MODELS_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    with pytest.raises(ModelFileMissing, match="vocal.npy .*studio models fetch --only negative-style"):
        load_negative_style(models_dir=tmp_path / "models")
    dest = tmp_path / "models" / "ASLP-lab" / "DiffRhythm" / "infer" / "example" / "vocal.npy"
    dest.parent.mkdir(parents=True)
    shutil.copy(reference_dir / "vocal.npy", dest)
    neg = load_negative_style(models_dir=tmp_path / "models")
    assert neg.shape == (512,) and abs(np.linalg.norm(neg) - 1) < 1e-3


def test_encoder_from_the_mulan_model_files(tmp_path, monkeypatch):
    """The `mulan` manifest entry resolves to what load_style_model needs (three hub repos)."""

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    p = write_tiny_mulan(tmp_path / "src")
    mdir = tmp_path / "models"
    shutil.copytree(p["mulan"], mdir / "OpenMuQ" / "MuQ-MuLan-large")
    (mdir / "OpenMuQ" / "MuQ-large-msd-iter").mkdir(parents=True)
    shutil.copy(p["muq_config"], mdir / "OpenMuQ" / "MuQ-large-msd-iter" / "config.json")
    shutil.copytree(p["text"], mdir / "FacebookAI" / "xlm-roberta-base")
    enc = local_encoder_from_models(mdir)
    assert enc.model_id == "OpenMuQ/MuQ-MuLan-large" and enc.embed_text(["folk"]).shape == (1, 512)


def test_host_modules_do_not_import_torch():
    import subprocess
    import sys

    code = ("import sys, engine.style, engine.reference, engine.audio_files, engine.modelfiles.fetch, "
            "studio.cli.model_files; print(sorted(m for m in ('torch', 'gradio', 'scipy', 'soxr') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
