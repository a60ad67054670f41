"""Read a user's text file (lyrics, prompts, batch lists) whatever its encoding, with a size limit.

Encodings are tried in this order: a byte-order mark decides (UTF-8, UTF-16 LE/BE, UTF-32 LE/BE);
then strict UTF-8; then UTF-16 without a mark when every other byte is NUL (Notepad's "Unicode"
saved without BOM); then Windows-1252 and finally Latin-1, which decodes any byte. Binary files
(NUL bytes in text that is not UTF-16/32) are refused. `-` reads standard input. Only regular files are
read: a FIFO, a device, a socket is refused from its `stat` before it is opened, and the file is opened
non-blocking and checked again (so one swapped in between cannot block the reader either). Errors are
`TextFileError` with a message meant for the user; nothing here exits or prints.
"""

from __future__ import annotations

import codecs
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

DEFAULT_LIMIT = 256 * 1024  # bytes; lyrics are a few KiB, anything this big is a wrong file

_BOMS = [  # UTF-32 first: its little-endian mark starts with UTF-16's
    (codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"), (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"),
]


class TextFileError(ValueError):
    """The file cannot be read as text; the message says why and what to do."""


@dataclass(frozen=True)
class TextFile:
    text: str
    encoding: str  # the codec used, "+bom" when a byte-order mark was removed
    name: str
    size: int  # bytes read


def decode_text(data: bytes, name: str = "<bytes>") -> tuple[str, str]:
    """(text, encoding) for raw bytes; raises TextFileError for binary data."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            try:
                return data[len(bom):].decode(codec), codec + "+bom"
            except UnicodeDecodeError as exc:
                raise TextFileError(f"{name}: starts with a {codec} byte-order mark but is not {codec}: {exc}") from exc
    try:
        text = data.decode("utf-8")
        encoding = "utf-8"
    except UnicodeDecodeError:
        text, encoding = "", ""
    if not encoding and len(data) >= 4 and len(data) % 2 == 0:
        even, odd = data[0::2], data[1::2]
        for zeros, codec in ((odd, "utf-16-le"), (even, "utf-16-be")):
            if zeros.count(0) >= 0.9 * len(zeros):
                try:
                    return data.decode(codec), codec
                except UnicodeDecodeError:
                    pass
    if not encoding:
        for codec in ("cp1252", "latin-1"):
            try:
                text, encoding = data.decode(codec), codec
                break
            except UnicodeDecodeError:
                continue
    if "\x00" in text:
        raise TextFileError(f"{name}: looks like a binary file (it holds NUL bytes), not text")
    return text, encoding


def _read_limited(stream: BinaryIO, limit: int, name: str) -> bytes:
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise TextFileError(
            f"{name}: larger than {limit // 1024} KiB; lyric and prompt files are limited to {limit // 1024} KiB "
            "(is this the right file?)")
    return data


def describe_mode(mode: int) -> str:
    """What a non-regular file is, in words ("a FIFO (named pipe)", "a folder", ...)."""
    for test, words in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                        (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                        (stat.S_ISBLK, "a block device")):
        if test(mode):
            return words
    return "not a regular file"


def _not_regular(p: Path, mode: int) -> TextFileError:
    if stat.S_ISDIR(mode):
        return TextFileError(f"{p}: is a folder, not a text file")
    return TextFileError(f"{p}: is {describe_mode(mode)}, not a regular file; give the path of a text file")


def read_text_file(path: str | Path, *, limit: int = DEFAULT_LIMIT, stdin: BinaryIO | None = None,
                   allow_pipe: bool = False) -> TextFile:
    """Read `path` (or standard input for "-") as text. Raises TextFileError with a clear message.

    `allow_pipe`: a FIFO the caller named on purpose (`<(...)` on a command line) is read, blocking
    until its writer finishes; every other non-regular file is still refused."""
    if str(path) == "-":
        stream = stdin if stdin is not None else sys.stdin.buffer
        data = _read_limited(stream, limit, "standard input")
        text, encoding = decode_text(data, "standard input")
        return TextFile(text, encoding, "-", len(data))
    p = Path(path)
    try:
        st = p.stat()
        pipe = allow_pipe and stat.S_ISFIFO(st.st_mode)
        if not stat.S_ISREG(st.st_mode) and not pipe:
            raise _not_regular(p, st.st_mode)  # refused before open: opening a FIFO would block
        if st.st_size > limit:
            raise TextFileError(
                f"{p}: {st.st_size / 1024:.0f} KiB is larger than the {limit // 1024} KiB limit for lyric and "
                "prompt files (is this the right file?)")
        if pipe:
            with p.open("rb") as fh:
                data = _read_limited(fh, limit, str(p))
        else:
            # Non-blocking, then checked again: a FIFO swapped in after the stat cannot block us.
            fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
            with os.fdopen(fd, "rb") as fh:
                mode = os.fstat(fd).st_mode
                if not stat.S_ISREG(mode):
                    raise _not_regular(p, mode)
                data = _read_limited(fh, limit, str(p))
    except FileNotFoundError as exc:
        raise TextFileError(f"{p}: no such file") from exc
    except PermissionError as exc:
        raise TextFileError(f"{p}: permission denied") from exc
    except OSError as exc:
        raise TextFileError(f"{p}: cannot be read: {exc.strerror or exc}") from exc
    text, encoding = decode_text(data, str(p))
    return TextFile(text, encoding, str(p), len(data))
