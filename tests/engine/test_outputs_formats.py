"""Every output format at full length, and an encoder that crashes natively costing one take only.

The decoded audio is fed straight to the output stage (no DiT): a 285 s song is written as WAV, FLAC,
MP3 and OGG and read back. The crash is a real SIGSEGV inside the OGG encoder, injected through a
`sitecustomize` on PYTHONPATH that every child Python started by the test loads; only a process that
really writes OGG dies, so the test fails if the studio ever encodes in its own process again.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from device_worker.audio import to_int16
from engine.encoder import EncoderError
from engine.outputs import TakeRecord, write_take

FULL_S = 6144 * 2048 / 44100  # 285.3 s: the longest song DiffRhythm 1.2 full makes


def song(seconds: float) -> np.ndarray:
    t = np.arange(int(seconds * 44100)) / 44100
    left = 0.5 * np.sin(2 * np.pi * 440 * t) * (1 + 0.3 * np.sin(2 * np.pi * 0.1 * t))
    return np.stack([left, 0.4 * np.sin(2 * np.pi * 330 * t)]).astype(np.float32)  # [2, n]


def info(title: str = "Long night") -> TakeRecord:
    return TakeRecord(job_id="j1", take=0, seed=7, request={"title": title, "lyrics": "[00:01.00]hi\n",
                                                          "style": {"text": "slow rock"}})


@pytest.fixture()
def crashing_ogg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Children started from here segfault on their first OGG write."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(textwrap.dedent("""
        import os, signal
        import soundfile

        _write = soundfile.SoundFile.write

        def write(self, data):
            if self.format == "OGG":
                os.kill(os.getpid(), signal.SIGSEGV)
            return _write(self, data)

        soundfile.SoundFile.write = write
    """))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))


def test_a_full_length_song_in_every_format_reads_back(tmp_path: Path) -> None:
    audio = song(FULL_S)
    files = write_take(tmp_path, audio, info(), ("wav", "flac", "mp3", "ogg"))
    assert set(files) == {"wav", "flac", "mp3", "ogg", "json"}
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(os.path.basename(p) for p in files.values())
    want = to_int16(audio)
    for fmt in ("wav", "flac"):  # lossless: the exact int16 samples
        got, rate = sf.read(files[fmt], dtype="int16")
        assert rate == 44100 and np.array_equal(got, want), fmt
    ref = want.astype(np.float32) / 32768
    for fmt in ("mp3", "ogg"):  # lossy: the whole song is there and sounds like it
        got, rate = sf.read(files[fmt], dtype="float32")
        assert rate == 44100 and abs(got.shape[0] - want.shape[0]) < 4096, (fmt, got.shape)
        n = min(got.shape[0], ref.shape[0])
        for ch in range(2):
            tail = slice(n - 10 * 44100, n)  # the last ten seconds too: nothing truncated
            corr = np.corrcoef(got[tail, ch], ref[tail, ch])[0, 1]
            assert corr > 0.95, (fmt, ch, corr)
    record = json.loads(Path(files["json"]).read_text())
    assert record["audio"]["frames"] == want.shape[0] and record["files"]["ogg"].endswith(".ogg")
    from mutagen import File

    for fmt in ("flac", "ogg"):
        assert File(files[fmt])["TITLE"] == ["Long night"]
    assert str(File(files["mp3"]).tags["TIT2"]) == "Long night"


def test_a_native_encoder_crash_fails_the_take_and_leaves_nothing(tmp_path: Path, crashing_ogg: None) -> None:
    take = tmp_path / "take"
    take.mkdir()
    with pytest.raises(EncoderError) as err:
        write_take(take, song(3), info(), ("wav", "ogg"))
    msg = str(err.value)
    assert "OGG" in msg and "SIGSEGV" in msg and "/" not in msg, msg
    assert not take.exists() or list(take.iterdir()) == []  # no WAV of a failed take, no temporaries
    take.mkdir(exist_ok=True)
    files = write_take(take, song(3), info(), ("wav", "flac"))  # the next take still writes
    assert sf.info(files["flac"]).frames == 3 * 44100


def test_the_studio_keeps_serving_after_an_encoder_crash(tmp_path: Path, crashing_ogg: None) -> None:
    from studio_helpers import api_client, form, studio_on_test_model

    with studio_on_test_model(tmp_path) as (url, svc):
        c = api_client(url, svc.config.data_dir)
        bad = c.predict(form(formats=["wav", "ogg"], title="Crashes"), "", api_name="/submit")
        final = list(c.submit(bad["takes"][0], api_name="/follow"))[-1]
        assert final["status"] == "failed", final
        assert "OGG encoder crashed" in final["error"] and "/" not in final["error"], final["error"]
        assert svc.store.get_take(bad["takes"][0]).status == "failed"  # not left "running"
        good = c.predict(form(formats=["wav", "flac"], title="Fine"), "", api_name="/submit")
        final = list(c.submit(good["takes"][0], api_name="/follow"))[-1]
        assert final["status"] == "done" and sf.info(svc.store.get_take(final["id"]).files["flac"]).frames > 0


def test_edits_and_extensions_of_one_take_are_written_under_their_own_names():
    """The walk found an edit and an extension of a take all downloading as `<title>-t0-s<seed>.wav`;
    the files `studio render` writes say which they are, in the musician's word ("extension")."""
    from engine.outputs import file_stem

    plain, edit, cont = info(), info(), info()
    edit.request["edit"] = {"song": "x.wav", "segments": [[1.0, 2.0]], "mode": "edit"}
    cont.request["edit"] = {"song": "x.wav", "segments": [], "mode": "continue"}
    stems = [file_stem(t) for t in (plain, edit, cont)]
    assert stems[0].startswith("long-night-t0-s7-") and stems[1].startswith("long-night-edit-t0-s7-")
    assert stems[2].startswith("long-night-extension-t0-s7-") and len(set(stems)) == 3
