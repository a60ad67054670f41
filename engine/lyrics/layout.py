"""Lay lyric tokens out on the latent frames, exactly as upstream's `get_lrc_token`, with a report.

Upstream, for `duration_s` (95 -> base model, 2048 frames; 96-285 -> full model, 6144 frames):

1. every parsed line is tokenised (g2p model ids);
2. lines with `t < duration_s` are kept (file order, no sorting);
3. base model only: the last kept line is dropped (training used the last timestamp as the song end);
4. `end_frame` = 2048 (base) or `min(int(duration_s * 44100 / 2048), 6144)`;
5. per line: tokens with inner periods turned into commas plus one period; start at
   `max(int(t * 44100 / 2048), end of the previous line)`; cut at `end_frame`;
6. `song_duration` = fp16(end_frame / max_frames).

Differences (documented in docs/lyrics.md), all for inputs upstream crashes on or drops silently:
empty / punctuation-only timed lines are breaks (one period token) instead of crashing; digits-only
lines are read as numbers; lines in unsupported scripts place only the period and are reported
`unsung`; non-finite times are reported and skipped; every dropped, skipped or cut line is reported.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field

from device_worker.shapes import BASE_FRAMES, FRAME_RATE, end_frame_for, max_frames_for, seconds_to_frame
from engine.lyrics.g2p import UPSTREAM, LyricTokenizer, chinese_note, dropped_warning
from engine.lyrics.lrc import LYRIC, UNPARSEABLE, parse_lrc
from engine.lyrics.report import (
    BREAK,
    DROPPED,
    END,
    IGNORED,
    LOSES_WORDS,
    PUSHED,
    SKIPPED,
    SUNG,
    TRUNCATED,
    UNSUNG,
    LineReport,
    mmss,
    timing_warnings,
)
from engine.lyrics.vocab import COMMA_ID, PERIOD_ID

_DEFAULT: dict[str, LyricTokenizer] = {}


@dataclass
class LyricLayout:
    tokens: list[int]  # one model id per frame, len == end_frame (0 = nothing)
    end_frame: int
    max_frames: int
    song_duration: float  # fp16-rounded end_frame / max_frames, upstream's value
    song_duration_exact: float
    duration_s: float
    model: str  # "base" or "full"
    lines: list[LineReport]
    can_sing: bool
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "tokens": self.tokens, "end_frame": self.end_frame, "max_frames": self.max_frames,
            "song_duration": self.song_duration, "song_duration_exact": self.song_duration_exact,
            "duration_s": self.duration_s, "model": self.model, "can_sing": self.can_sing,
            "warnings": self.warnings, "notes": self.notes, "lines": [r.to_dict() for r in self.lines],
        }


def fp16(x: float) -> float:
    """Round to the nearest IEEE half (what upstream's `.half()` does to song_duration)."""
    return struct.unpack("<e", struct.pack("<e", x))[0]


def default_tokenizer() -> LyricTokenizer:
    """One tokenizer per process and lookup setting (the vocab and Chinese files it finds)."""
    key = "\0".join(os.environ.get(name, "") for name in
                    ("STUDIO_LYRICS_VOCAB", "STUDIO_MODELS_DIR", "STUDIO_CHINESE_G2P_DIR"))
    if key not in _DEFAULT:
        _DEFAULT[key] = LyricTokenizer()
    return _DEFAULT[key]


def _song_language(tokenizer: LyricTokenizer, texts: list[str]) -> str:
    """'zh' when most lyric characters are Chinese: then digits-only lines are read as Chinese numerals."""
    zh = sum(1 for t in texts for ch in t if "\u4e00" <= ch <= "\u9fa5")
    en = sum(1 for t in texts for ch in t if ch.isascii() and ch.isalpha())
    return "zh" if zh > en else "en"


def layout_lyrics(text: str, duration_s: float, *, tokenizer: LyricTokenizer | None = None) -> LyricLayout:
    """Upstream's lyric track for `text` (LRC) and a song of `duration_s` seconds, plus a per-line report.

    Raises ValueError for an unsupported duration; never for the text.
    """
    max_frames = max_frames_for(duration_s)
    end_frame = end_frame_for(duration_s)
    tok = tokenizer or default_tokenizer()
    parsed = parse_lrc(text)
    digits_lang = _song_language(tok, [p.text for p in parsed if p.kind == LYRIC])
    reports: list[LineReport] = []
    timed: list[LineReport] = []  # lines that take part in upstream's layout, in file order
    notes: set[str] = set()
    for p in parsed:
        if p.kind != LYRIC:
            status = SKIPPED if p.kind == UNPARSEABLE and p.raw.strip() else IGNORED
            reports.append(LineReport(p.number, p.raw, status, p.note))
            continue
        enc = tok.encode(p.text, digits_language=digits_lang)
        if enc.chinese_mode and enc.chinese_mode != UPSTREAM:
            notes.add(chinese_note(tok))
        reasons = [r for r in (p.note, enc.note) if r]
        r = LineReport(p.number, p.raw, SUNG, "; ".join(reasons), p.time, p.text, list(enc.tokens),
                       frame=seconds_to_frame(p.time))
        if enc.dropped:
            r.warnings.append(dropped_warning(enc.dropped))
        if enc.kind == "break":
            r.status = BREAK
        elif enc.kind == "unsupported":
            r.status = UNSUNG
        reports.append(r)
        if p.time < duration_s:
            timed.append(r)
        else:
            r.status, r.frame = DROPPED, None
            r.reason = "; ".join([*reasons, f"starts at {mmss(p.time)}, at or after the song end ({duration_s:g} s)"])
    if max_frames == BASE_FRAMES and timed:
        last = timed.pop()
        if last.status == BREAK:
            last.status, last.reason = END, "end marker: the base model ends the song at the last timestamp"
        else:
            last.status = DROPPED
            last.reason = ("the base model treats the last line as the song's end marker and never sings it: "
                           "add an empty timed line after it")
        last.frame = None if last.status == DROPPED else last.frame
    track = [0] * end_frame
    previous_end = 0
    prev_time: float | None = None
    for r in timed:
        ids = [COMMA_ID if x == PERIOD_ID else x for x in r.tokens] + [PERIOD_ID]
        start = max(r.frame, previous_end)
        n = min(len(ids), end_frame - start)
        track[start:start + max(n, 0)] = ids[:max(n, 0)]
        r.start_frame, r.placed = start, max(n, 0)
        r.lost = len(ids) - r.placed
        if r.placed == 0:
            r.status, r.start_frame = DROPPED, None
            r.reason = _join(r.reason, "no room: the lines before it fill the song to its end")
        elif r.lost and r.status in (SUNG, UNSUNG, BREAK):
            r.status = TRUNCATED if r.lost > 1 or r.status != SUNG else r.status
            r.reason = _join(r.reason, f"cut at the song end: {r.lost} of {len(ids)} tokens lost")
        elif start > r.frame and r.status == SUNG:
            r.status = PUSHED
            late = start - r.frame
            why = ("its time is earlier than the line before it (lines keep file order)"
                   if prev_time is not None and r.time < prev_time else "the line before it is still running")
            r.reason = _join(r.reason, f"starts {late} frames ({late / FRAME_RATE:.2f} s) late: {why}")
        if prev_time is not None and r.time < prev_time:
            r.warnings.append(f"time goes backwards ({mmss(r.time)} after {mmss(prev_time)})")
        prev_time = r.time
        previous_end = start + max(n, 0)
    warnings = timing_warnings([r for r in reports if r.start_frame is not None or r.status == END], end_frame)
    can_sing = not any(r.status in LOSES_WORDS for r in reports)
    exact = end_frame / max_frames
    return LyricLayout(track, end_frame, max_frames, fp16(exact), exact, float(duration_s),
                       "base" if max_frames == BASE_FRAMES else "full", reports, can_sing, warnings,
                       sorted(notes))


def _join(a: str, b: str) -> str:
    return f"{a}; {b}" if a else b
