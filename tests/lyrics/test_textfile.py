"""engine.textfile: encodings, empty, oversized, binary, stdin."""

from __future__ import annotations

import codecs
import io
import os
import socket
import tempfile
import threading
from pathlib import Path

import pytest

from engine.textfile import TextFileError, decode_text, read_text_file

TEXT = "[00:01.00]Café, 你好\n[00:03.00]naïve ’quotes’\n"


@pytest.mark.parametrize("encoding,prefix,expected", [
    ("utf-8", b"", "utf-8"),
    ("utf-8", codecs.BOM_UTF8, "utf-8+bom"),
    ("utf-16-le", codecs.BOM_UTF16_LE, "utf-16-le+bom"),
    ("utf-16-be", codecs.BOM_UTF16_BE, "utf-16-be+bom"),
    ("utf-32-le", codecs.BOM_UTF32_LE, "utf-32-le+bom"),
    ("utf-16-le", b"", "utf-16-le"),
])
def test_unicode_encodings(tmp_path, encoding, prefix, expected):
    path = tmp_path / "lyrics.lrc"
    path.write_bytes(prefix + TEXT.encode(encoding))
    got = read_text_file(path)
    assert got.text == TEXT and got.encoding == expected


def test_latin1_and_cp1252_fallback(tmp_path):
    path = tmp_path / "old.lrc"
    path.write_bytes("[00:01.00]Café crème\n".encode("latin-1"))
    assert read_text_file(path).text == "[00:01.00]Café crème\n"
    path.write_bytes(b"[00:01.00]don\x92t\n")  # Windows curly apostrophe
    assert read_text_file(path).text == "[00:01.00]don\u2019t\n"
    assert decode_text(b"\x81\x8d")[1] == "latin-1"  # bytes cp1252 leaves undefined


def test_empty_oversized_binary_missing(tmp_path):
    empty = tmp_path / "empty.lrc"
    empty.write_bytes(b"")
    assert read_text_file(empty).text == ""
    big = tmp_path / "big.lrc"
    big.write_bytes(b"a" * (256 * 1024 + 1))
    with pytest.raises(TextFileError, match="256 KiB"):
        read_text_file(big)
    binary = tmp_path / "song.wav"
    binary.write_bytes(b"RIFF\x00\x00\x01\x02data\x00\xff")
    with pytest.raises(TextFileError, match="binary"):
        read_text_file(binary)
    with pytest.raises(TextFileError, match="no such file"):
        read_text_file(tmp_path / "nope.lrc")
    with pytest.raises(TextFileError, match="folder"):
        read_text_file(tmp_path)


def test_stdin_with_limit():
    assert read_text_file("-", stdin=io.BytesIO(TEXT.encode())).text == TEXT
    with pytest.raises(TextFileError, match="standard input"):
        read_text_file("-", limit=10, stdin=io.BytesIO(b"x" * 11))


def _within(seconds: float, fn):
    """fn() on a thread; fails (instead of hanging the suite) when it blocks, e.g. opening a FIFO."""
    out: list = []

    def run():
        try:
            out.append(("ok", fn()))
        except Exception as exc:  # noqa: BLE001 - handed to the test
            out.append(("err", exc))

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert out, f"blocked for {seconds} s"
    kind, value = out[0]
    if kind == "err":
        raise value
    return value


def test_fifos_devices_and_sockets_are_refused_before_opening(tmp_path):
    fifo = tmp_path / "song.lrc"
    os.mkfifo(fifo)  # nobody writes: a blocking open for reading would never return
    with pytest.raises(TextFileError, match=r"song.lrc: is a FIFO \(named pipe\), not a regular file"):
        _within(10, lambda: read_text_file(fifo))
    with pytest.raises(TextFileError, match="/dev/zero: is a character device, not a regular file"):
        _within(10, lambda: read_text_file("/dev/zero"))
    with pytest.raises(TextFileError, match="is a character device"):
        _within(10, lambda: read_text_file("/dev/null"))
    sock_path = tempfile.mktemp(prefix="drs-t", suffix=".lrc")  # short: unix socket paths cap at ~107 bytes
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(sock_path)
        try:
            with pytest.raises(TextFileError, match="is a socket, not a regular file"):
                _within(10, lambda: read_text_file(sock_path))
        finally:
            os.unlink(sock_path)
    link = tmp_path / "link.lrc"
    link.symlink_to(fifo)
    with pytest.raises(TextFileError, match="is a FIFO"):
        _within(10, lambda: read_text_file(link))
    real = tmp_path / "real.lrc"
    real.write_text(TEXT, encoding="utf-8")
    (tmp_path / "real-link.lrc").symlink_to(real)
    assert read_text_file(tmp_path / "real-link.lrc").text == TEXT  # a link to a regular file is fine


def test_a_fifo_swapped_in_after_the_stat_is_refused_by_the_open(tmp_path, monkeypatch):
    fifo = tmp_path / "swapped.lrc"
    os.mkfifo(fifo)
    regular = tmp_path / "regular.lrc"
    regular.write_text("x")
    real_stat = Path.stat
    monkeypatch.setattr(Path, "stat", lambda self, **kw: real_stat(regular if self == fifo else self, **kw))
    with pytest.raises(TextFileError, match="swapped.lrc: is a FIFO"):
        _within(10, lambda: read_text_file(fifo))


def test_a_pipe_named_on_purpose_is_read_when_allowed(tmp_path):
    fifo = tmp_path / "jobs.jsonl"
    os.mkfifo(fifo)

    def write():
        with open(fifo, "wb") as fh:
            fh.write(TEXT.encode("utf-8"))

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    assert _within(10, lambda: read_text_file(fifo, allow_pipe=True)).text == TEXT
    writer.join(5)
    with pytest.raises(TextFileError, match="is a character device"):
        read_text_file("/dev/zero", allow_pipe=True)  # only FIFOs: a device is still refused
