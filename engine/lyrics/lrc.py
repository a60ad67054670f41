"""LRC parsing: upstream's fixed-slice grammar exactly, a few common extras, and a reason for every line.

Upstream (`parse_lyrics`) strips the whole text, splits it on "\\n" and, per line, reads
`time = line[1:9]`, `text = line[10:].strip()`, `minutes, seconds = time.split(":")`,
`t = int(minutes) * 60 + float(seconds)`; any exception silently skips the line. So the effective
grammar is `[mm:ss.xx]text`: `[00:14.500]x` reads as 14.50 s with text "]x", `[0:12.00]x` is skipped,
and lines keep file order. Every line upstream reads is read here the same way, so layouts stay
identical to upstream's for the inputs it accepts.

Extras, only for lines upstream cannot read (so they never change an upstream layout's lines):

* a UTF-8 byte-order mark before the first line is removed (upstream would skip that line);
* lone "\\r" line ends count as line ends (CRLF already works upstream, "\\r" is stripped);
* `[m:ss]` and `[mm:ss]` (whole seconds) are read.

`[m:ss.xx]` (one-digit minute with centiseconds) is deliberately *not* read: upstream skips it and the
reference layouts pin that; the report says so and shows the fix (`[0m:ss.xx]`).

Lines that are not lyrics are classified (`blank`, `metadata` such as `[ti:...]`, `section` such as
`[Chorus]`, `unparseable`) so the report can say what happened to each one. A time that is not a finite
number (upstream reads "nan"/"inf"; "-inf" crashes its layout) makes the line `unparseable`.
`parse_lrc` never raises.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

_EXTENDED = re.compile(r"^\s*\[(\d{1,2}):(\d{2})\](.*)$", re.DOTALL)
_ONE_DIGIT_CS = re.compile(r"^\s*\[(\d):(\d{2}(?:\.\d+)?)\]")
_METADATA = re.compile(r"^\s*\[([A-Za-z#][A-Za-z0-9_#-]*)\s*:(.*)\]\s*$")
_SECTION = re.compile(r"^\s*\[\s*([A-Za-z][A-Za-z0-9 _'-]{0,40}?)\s*\]\s*$")
_ANY_TIMESTAMP = re.compile(r"\[\d{1,3}:\d{1,2}(?:[.:]\d{1,3})?\]")

LYRIC, BLANK, METADATA, SECTION, UNPARSEABLE = "lyric", "blank", "metadata", "section", "unparseable"


@dataclass(frozen=True)
class LrcLine:
    number: int  # 1-based line number in the file
    raw: str
    kind: str  # lyric, blank, metadata, section, unparseable
    time: float | None = None  # seconds, for lyric lines
    text: str = ""  # lyric text exactly as upstream keeps it
    grammar: str = ""  # "upstream" or "extended" for lyric lines
    note: str = ""


def _upstream_time(line: str) -> tuple[float, str] | None:
    """Upstream's reading of one line, or None where upstream skips it (same conversions, same slices)."""
    try:
        stamp, text = line[1:9], line[10:].strip()
        minutes, seconds = stamp.split(":")
        return int(minutes) * 60 + float(seconds), text
    except Exception:  # noqa: BLE001 - upstream skips on any error; so do we, but we say so
        return None


def split_lines(text: str) -> list[tuple[int, str]]:
    """(file line number, line) pairs of upstream's `text.strip().split("\\n")`, numbered as in the file."""
    text = text[1:] if text.startswith("\ufeff") else text
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    stripped = text.strip()
    if not stripped:
        return []
    first = text[: len(text) - len(text.lstrip())].count("\n") + 1
    return [(first + i, line) for i, line in enumerate(stripped.split("\n"))]


def _classify(number: int, line: str) -> LrcLine:
    read = _upstream_time(line)
    if read is not None:
        t, text = read
        if not math.isfinite(t):
            return LrcLine(number, line, UNPARSEABLE, note=f"time {line[1:9]!r} is not a finite number")
        notes = []
        if text.startswith("]"):
            notes.append("three-decimal timestamp: read to the centisecond, and the ']' is kept in the text (not sung)")
        elif not line.startswith("[") or line[9:10] != "]":
            notes.append("timestamp brackets are malformed, but the time is read anyway")
        if t < 0:
            notes.append("negative time: placed at the song start (or after the previous line)")
        if _ANY_TIMESTAMP.search(text):
            notes.append("the text holds another timestamp, which would be sung as numbers: "
                         "give each repeat its own line")
        return LrcLine(number, line, LYRIC, t, text, "upstream", "; ".join(notes))
    if not line.strip():
        return LrcLine(number, line, BLANK)
    m = _EXTENDED.match(line)
    if m:
        t = int(m.group(1)) * 60 + int(m.group(2))
        return LrcLine(number, line, LYRIC, float(t), m.group(3).strip(), "extended",
                       "[mm:ss] timestamp: read as [mm:ss.00]")
    m = _METADATA.match(line)
    if m:
        return LrcLine(number, line, METADATA, note=f"tag [{m.group(1)}:] is information, not sung")
    m = _SECTION.match(line)
    if m:
        return LrcLine(number, line, SECTION, note=f"section tag {m.group(1)!r} ignored")
    if _ONE_DIGIT_CS.match(line):
        fixed = "[0" + line.lstrip()[1:]
        return LrcLine(number, line, UNPARSEABLE,
                       note=f"one-digit minute with centiseconds is not read: write {fixed[:10]!r}")
    if _ANY_TIMESTAMP.search(line):
        return LrcLine(number, line, UNPARSEABLE, note="timestamp must open the line as [mm:ss.xx]")
    return LrcLine(number, line, UNPARSEABLE,
                   note="no [mm:ss.xx] timestamp: the line is not sung (use `studio lyrics time` for plain lyrics)")


def parse_lrc(text: str) -> list[LrcLine]:
    """Classify every line of an LRC text. Never raises."""
    if not isinstance(text, str):
        return []
    return [_classify(number, line) for number, line in split_lines(text)]


def format_time(t: float) -> str:
    """Seconds -> upstream's `mm:ss.xx` (centiseconds truncated)."""
    cs = max(0, int(round(t * 100, 6)))
    return f"{cs // 6000:02d}:{cs // 100 % 60:02d}.{cs % 100:02d}"
