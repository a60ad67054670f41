"""`studio lyrics heard`: the report line by line, JSON, exit 1 when a line is missed, clear errors. The
words heard are set by the test where the outcome matters (random weights hear nothing meaningful); one
run goes through the real child process and the test model's tiny Whisper."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf
from click.testing import CliRunner
from lyrics_fixtures import needs_espeak

import studio.cli.heard as cli_heard
from studio.cli.lyrics import lyrics

pytestmark = needs_espeak
LRC = "[00:01.00]hello world\n[00:04.00]goodbye moon\n[00:07.00]\n"


@pytest.fixture()
def files(tmp_path):
    wav, lrc = tmp_path / "take.wav", tmp_path / "song.lrc"
    sf.write(wav, (np.random.default_rng(0).standard_normal((44100 * 9, 2)) * 0.1).astype(np.float32), 44100)
    lrc.write_text(LRC)
    return str(wav), str(lrc)


def hears(words):
    return lambda folder, device="cpu": (lambda audio, windows, language: ("fake-whisper", words))


def test_every_line_heard_exits_0_and_a_missed_line_exits_1(files, monkeypatch) -> None:
    wav, lrc = files
    everything = [("hello", 1.1, 1.5), ("world", 1.6, 2.0), ("goodbye", 4.1, 4.6), ("moon", 4.7, 5.0)]
    monkeypatch.setattr(cli_heard, "child_transcriber", hears(everything))
    ok = CliRunner().invoke(lyrics, ["heard", wav, "--lyrics", lrc, "--model", "test"])
    assert ok.exit_code == 0, ok.output
    assert "PER 0.0%" in ok.output and "every line was heard" in ok.output
    monkeypatch.setattr(cli_heard, "child_transcriber", hears(everything[:2]))
    lost = CliRunner().invoke(lyrics, ["heard", wav, "--lyrics", lrc, "--model", "test", "--json"])
    assert lost.exit_code == 1, lost.output
    check = json.loads(lost.output)
    assert [ln["status"] for ln in check["lines"]] == ["sung", "missed"]
    assert check["lines"][1]["expected"] == "goodbye moon" and check["per"] > 0.3


def test_real_child_transcriber_and_bad_input(files, tmp_path) -> None:
    wav, lrc = files
    res = CliRunner().invoke(lyrics, ["heard", wav, "--lyrics", lrc, "--model", "test", "--json"])
    assert res.exit_code in (0, 1), res.output  # whatever the random weights heard, a report came back
    check = json.loads(res.output)
    assert check["model"].startswith("whisper") and len(check["lines"]) == 2
    bad = tmp_path / "not.wav"
    bad.write_text("no audio here")
    res = CliRunner().invoke(lyrics, ["heard", str(bad), "--lyrics", lrc, "--model", "test"])
    assert res.exit_code == 2 and "not a readable audio file" in res.output and str(tmp_path) not in res.output
    res = CliRunner().invoke(lyrics, ["heard", wav, "--lyrics", lrc, "--duration", "50", "--model", "test"])
    assert res.exit_code == 2 and "--duration" in res.output
