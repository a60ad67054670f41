"""`studio lyrics check/time` through click's CliRunner and through the installed entry point."""

from __future__ import annotations

import codecs
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from lyrics_fixtures import needs_espeak, vocab_path  # noqa: F401

from studio.cli.lyrics import lyrics

ROOT = Path(__file__).resolve().parents[2]
GOOD = "[ti:t]\n[00:02.00]Hello there\n[00:05.00]Goodbye\n[00:09.00]\n"
LOSSY = "[00:02.00]Hello there\nno timestamp here\n[00:05.00]Goodbye\n"

pytestmark = needs_espeak


@pytest.fixture()
def runner(vocab_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("STUDIO_LYRICS_VOCAB", str(vocab_path))
    return CliRunner()


def write(tmp_path: Path, name: str, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def test_check_exit_codes(runner, tmp_path):
    ok = runner.invoke(lyrics, ["check", write(tmp_path, "a.lrc", GOOD.encode()), "--duration", "95"])
    assert ok.exit_code == 0 and "singable as given" in ok.output
    lossy = runner.invoke(lyrics, ["check", write(tmp_path, "b.lrc", LOSSY.encode()), "-d", "120"])
    assert lossy.exit_code == 1 and "skipped" in lossy.output
    missing = runner.invoke(lyrics, ["check", str(tmp_path / "none.lrc"), "-d", "120"])
    assert missing.exit_code == 2 and "no such file" in missing.output
    bad_duration = runner.invoke(lyrics, ["check", write(tmp_path, "c.lrc", GOOD.encode()), "-d", "60"])
    assert bad_duration.exit_code == 2 and "95" in bad_duration.output


def test_check_json(runner, tmp_path):
    result = runner.invoke(lyrics, ["check", write(tmp_path, "a.lrc", GOOD.encode()), "-d", "120", "--json"])
    assert result.exit_code == 0
    data = json.loads(result.output)
    assert data["end_frame"] == 2583 and len(data["tokens"]) == 2583
    assert data["song_duration"] == 0.42041015625
    assert [line["status"] for line in data["lines"]] == ["ignored", "sung", "sung", "break"]
    assert data["lines"][1]["number"] == 2 and data["lines"][1]["tokens"]


def test_check_stdin_and_utf16(runner, tmp_path):
    piped = runner.invoke(lyrics, ["check", "-", "-d", "95"], input=GOOD)
    assert piped.exit_code == 0
    utf16 = write(tmp_path, "w.lrc", codecs.BOM_UTF16_LE + GOOD.replace("\n", "\r\n").encode("utf-16-le"))
    assert runner.invoke(lyrics, ["check", utf16, "-d", "95"]).exit_code == 0


def test_time_command(runner, tmp_path):
    plain = write(tmp_path, "p.txt", b"[Verse]\nHello there my friend\nGoodbye for now\n")
    result = runner.invoke(lyrics, ["time", plain, "-d", "120", "--tempo", "100", "--intro", "4"])
    assert result.exit_code == 0
    assert "[00:04.00]Hello there my friend" in result.output
    again = runner.invoke(lyrics, ["check", "-", "-d", "120"], input=result.output)
    assert again.exit_code == 0, again.output
    long = write(tmp_path, "long.txt", ("so many words in this line to sing along\n" * 90).encode())
    too_long = runner.invoke(lyrics, ["time", long, "-d", "95"])
    assert too_long.exit_code == 1 and "need at least" in too_long.output


def _studio(*args: str, env_vocab: Path) -> subprocess.CompletedProcess:
    exe = ROOT / ".venv" / "bin" / "studio"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "studio.cli"]
    env = {**os.environ, "STUDIO_LYRICS_VOCAB": str(env_vocab)}
    return subprocess.run([*cmd, "lyrics", *args], capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)


def test_real_subprocess_on_odd_files(tmp_path, vocab_path):  # noqa: F811
    utf16 = write(tmp_path, "u16.lrc", codecs.BOM_UTF16_LE + GOOD.encode("utf-16-le"))
    latin1 = write(tmp_path, "l1.lrc", "[00:02.00]Café crème\n[00:05.00]\n".encode("latin-1"))
    empty = write(tmp_path, "empty.lrc", b"")
    huge = write(tmp_path, "huge.lrc", b"[00:01.00]la\n" * 30000)
    done = _studio("check", utf16, "--duration", "95", env_vocab=vocab_path)
    assert done.returncode == 0, done.stderr
    done = _studio("check", latin1, "--duration", "95", "--json", env_vocab=vocab_path)
    assert done.returncode == 0 and json.loads(done.stdout)["lines"][0]["text"] == "Café crème"
    done = _studio("check", empty, "--duration", "120", env_vocab=vocab_path)
    assert done.returncode == 0 and "instrumental" in done.stdout
    done = _studio("check", huge, "--duration", "120", env_vocab=vocab_path)
    assert done.returncode == 2 and "256 KiB" in done.stderr
    done = _studio("check", write(tmp_path, "x.lrc", LOSSY.encode()), "--duration", "120", env_vocab=vocab_path)
    assert done.returncode == 1


ZH_LRC = ("[ti:歌]\n[00:01.00]我还没还你的钱\n[00:05.00]愛情不是你想賣就能賣\n[00:09.00]，。！？……\n"
          "[00:12.00]2024年我们一起去看海\n[00:16.00]我爱你 baby\n[00:20.00]\n")


def test_check_chinese_lrc_reports_every_line(runner, tmp_path, monkeypatch):
    models_dir = Path(os.environ.get("STUDIO_SHARED_DIR", ROOT.parent / "shared")) / "reference" / "models-dir"
    if not (models_dir / "ASLP-lab/DiffRhythm/g2p/sources/chinese_lexicon.txt").is_file():
        pytest.skip(f"upstream's Chinese g2p files not found under {models_dir}")
    monkeypatch.setenv("STUDIO_MODELS_DIR", str(tmp_path / "no-models"))
    lrc = write(tmp_path, "zh.lrc", ZH_LRC.encode())
    result = runner.invoke(lyrics, ["check", lrc, "-d", "95", "--json", "--models-dir", str(models_dir)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert [r["status"] for r in data["lines"]] == ["ignored", "sung", "sung", "break", "sung", "sung", "end"]
    assert data["lines"][2]["warnings"][0].startswith("not sung: 賣") and not data["notes"]
    assert data["lines"][1]["tokens"][:3] == [179, 82, 193]  # 我 还(huán): uo↓↑ x uan↑
    text = runner.invoke(lyrics, ["check", lrc, "-d", "95", "--models-dir", str(models_dir)]).output
    assert "warning: not sung: 賣" in text and "a pause in the singing" in text and "singable as given" in text
    bare = runner.invoke(lyrics, ["check", lrc, "-d", "95"])  # no Chinese files anywhere: the report says so
    assert bare.exit_code == 0 and "without DiffRhythm's pronunciation dictionary and polyphone model" in bare.output
