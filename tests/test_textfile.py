"""engine.textfile: encodings, empty, oversized, binary, stdin."""

from __future__ import annotations

import codecs
import io

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
