"""Did it sing my words? The words a speech recogniser heard in a take, checked line by line against
the lyric layout, in phonemes.

Pure functions, no model: the transcription (Whisper in the device worker) gives `HeardWord`s with
times; this module decides, for each sung line of the layout, which heard words belong to it and how
many of its phonemes came through.

Why phonemes and not words: the recogniser writes what it hears in its own spelling ("99" or "ninety
nine", 你 or 妮 for the same syllable), and the model sings phonemes. Both sides go through the studio's
own g2p (`engine.lyrics.LyricTokenizer`), the same one that made the tokens the model sang, so a line
written in Chinese characters and heard as homophones scores as sung. Chinese tones are dropped before
comparing: a melody overrides lexical tone, and recognisers pick the wrong-toned homophone often.

Alignment per line: the heard phonemes inside the line's window (its start to the next line's start,
widened by `slack_s` on both sides because singers and the model run early or late) are matched
against the line's phonemes by a semi-global edit distance: heard phonemes before and after the best
matching stretch are free (they belong to the neighbouring lines that the slack lets in), everything
inside counts (a skipped word is deletions, a stutter insertions). Score = 1 - errors / expected
phonemes; the take's PER is all errors over all expected phonemes of the checked lines.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

from device_worker.shapes import FRAME_RATE

SUNG, PARTLY, MISSED = "sung", "partly", "missed"
SUNG_SCORE = 0.7  # at least this share of a line's phonemes heard: sung (recognisers miss ~10-20% on good takes)
PARTLY_SCORE = 0.3  # below this the line is missed: what was heard is mostly neighbours or noise
SLACK_S = 1.5  # a line may start or end this much early or late and still be found
# Layout statuses whose words are placed in the song (engine.lyrics.report)
_PLACED = ("sung", "pushed", "truncated")
_TONES = str.maketrans("", "", "→↑↓")
_SILENT = frozenset({"_", ",", ".", "!", "?", "…", "'", '"', "-", ";", ":", ""})

Phonemize = Callable[[str], list[str]]


@dataclass(frozen=True)
class HeardWord:
    """One word (a Chinese character is a word) the recogniser heard, with its time in the take (s)."""

    text: str
    start: float
    end: float


@dataclass(frozen=True)
class LineWindow:
    """A sung line of the layout: its place in the report, its text and its time span in the take."""

    index: int  # position in the layout's report (`lyrics_report`)
    number: int  # line number in the lyric file
    text: str
    start: float  # seconds
    end: float  # the next line's start (or the song end)
    frames: tuple[int, int]  # [start, end) latent frames: what a re-sing regenerates


@dataclass
class LineCheck:
    index: int
    number: int
    time: float
    end: float
    frames: list[int]
    expected: str
    heard: str
    score: float
    status: str
    errors: int = 0
    phonemes: int = 0


@dataclass
class LyricsCheck:
    model: str
    per: float | None  # None when no line had phonemes to check
    lines: list[LineCheck] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def missed(self) -> list[LineCheck]:
        return [ln for ln in self.lines if ln.status == MISSED]

    @property
    def sung_share(self) -> float:
        """Share of the checked phonemes that were heard: the "most words sung first" key."""
        total = sum(ln.phonemes for ln in self.lines)
        return 1.0 - sum(ln.errors for ln in self.lines) / total if total else 1.0

    def to_dict(self) -> dict:
        return {"model": self.model, "per": self.per, "sung_share": round(self.sung_share, 4),
                "lines": [asdict(ln) for ln in self.lines], "notes": list(self.notes)}


def line_windows(report: Sequence[dict], end_frame: int) -> list[LineWindow]:
    """The sung lines of a layout report (`LyricLayout.lines` as dicts, as stored in take records), each
    spanning from its start frame to the next placed line's start (a break or the end marker ends it
    too), or to the song's end."""
    # The base model's end marker is not placed, but its timestamp still ends the line before it.
    marks = [(i, r, r["start_frame"] if r.get("start_frame") is not None else r.get("frame"))
             for i, r in enumerate(report) if r.get("start_frame") is not None or r.get("status") == "end"]
    out = []
    for k, (i, r, start) in enumerate(marks):
        if r.get("status") not in _PLACED or not r.get("tokens") or start is None:
            continue
        start = int(start)
        nxt = marks[k + 1][2] if k + 1 < len(marks) and marks[k + 1][2] is not None else end_frame
        end = max(min(int(nxt), end_frame), start + 1)
        if start >= end_frame:
            continue
        out.append(LineWindow(i, int(r.get("number", i + 1)), str(r.get("text", "")), start / FRAME_RATE,
                              end / FRAME_RATE, (start, end)))
    return out


def phonemes_of(phones: str) -> list[str]:
    """A g2p phone string ("h|ə|l|oʊ|_|w|...") -> the phonemes compared: no word breaks or punctuation,
    no Chinese tone marks."""
    out = []
    for p in phones.split("|"):
        p = p.translate(_TONES).strip()
        if p not in _SILENT:
            out.append(p)
    return out


_CJK = re.compile(r"([\u3400-\u9fff\uf900-\ufaff])")


def words_of(text: str) -> list[str]:
    """Words as both sides are read: whitespace-separated, each Chinese character on its own."""
    return [w for part in text.split() for w in _CJK.split(part) if w.strip()]


def tokenizer_phonemize(tokenizer: object, digits_language: str = "en") -> Phonemize:
    """`phonemize` through the studio's g2p: the same reading the model's tokens came from. Word by
    word, on both sides alike: espeak reads a word differently in context ("a" as ə or ɐ), and the
    recogniser's words come one at a time, so reading the lyric line whole would count that as an error."""

    def phonemize(text: str) -> list[str]:
        out: list[str] = []
        for word in words_of(text):
            out += phonemes_of(tokenizer.encode(word, digits_language=digits_language).phones)  # type: ignore[attr-defined]
        return out

    return phonemize


def semiglobal(expected: Sequence[str], heard: Sequence[str]) -> tuple[int, int, int]:
    """Edit distance of `expected` against the best-matching stretch of `heard` (gaps at heard's ends
    are free). Returns (errors, first, last): the stretch is heard[first:last]."""
    n, m = len(expected), len(heard)
    if n == 0:
        return 0, 0, 0
    if m == 0:
        return n, 0, 0
    # prev[j]: cost of expected[:i] aligned ending at heard[:j]; start[j]: where that stretch begins
    prev = [0] * (m + 1)
    start = list(range(m + 1))
    for i in range(1, n + 1):
        cur = [i] * (m + 1)
        cur_start = [0] * (m + 1)
        e = expected[i - 1]
        for j in range(1, m + 1):
            sub = prev[j - 1] + (e != heard[j - 1])
            dele = prev[j] + 1  # an expected phoneme not heard
            ins = cur[j - 1] + 1  # an extra heard phoneme inside the stretch (a stutter)
            best = min(sub, dele, ins)
            cur[j] = best
            cur_start[j] = start[j - 1] if best == sub else (start[j] if best == dele else cur_start[j - 1])
        prev, start = cur, cur_start
    j = min(range(m + 1), key=lambda k: (prev[k], k))
    return prev[j], start[j], j


def status_of(score: float) -> str:
    return SUNG if score >= SUNG_SCORE else PARTLY if score >= PARTLY_SCORE else MISSED


def check_lyrics(windows: Sequence[LineWindow], heard: Sequence[HeardWord], phonemize: Phonemize, *,
                 model: str = "", slack_s: float = SLACK_S) -> LyricsCheck:
    """Score every line of `windows` against the words heard in it (see the module docstring)."""
    # Each heard word's phonemes once, with the word they came from.
    word_ph = [phonemize(w.text) for w in heard]
    lines: list[LineCheck] = []
    total_err = total_ph = 0
    for win in windows:
        expected = phonemize(win.text)
        lo, hi = win.start - slack_s, win.end + slack_s
        seq: list[str] = []
        owner: list[int] = []
        for k, w in enumerate(heard):
            mid = (w.start + w.end) / 2
            if lo <= mid < hi:
                seq += word_ph[k]
                owner += [k] * len(word_ph[k])
        errors, first, last = semiglobal(expected, seq)
        score = max(0.0, 1.0 - errors / len(expected)) if expected else 1.0
        words = sorted(set(owner[first:last]))
        if status_of(score) == MISSED:  # the best stretch is then mostly a neighbour's: show the line's own span
            words = [k for k in words if win.start <= (heard[k].start + heard[k].end) / 2 < win.end]
        lines.append(LineCheck(win.index, win.number, round(win.start, 3), round(win.end, 3), list(win.frames),
                               win.text, " ".join(heard[k].text for k in words), round(score, 4),
                               status_of(score), min(errors, len(expected)), len(expected)))
        total_err += min(errors, len(expected))
        total_ph += len(expected)
    per = round(total_err / total_ph, 4) if total_ph else None
    return LyricsCheck(model, per, lines)


def resing_segments(check: dict, indices: Sequence[int] | None = None) -> list[list[int]]:
    """The frame ranges a re-sing regenerates: each chosen line (default: the missed ones) from its frame
    to the next line's, adjacent ranges merged. `check` is a stored `lyrics_check` dict; `indices` are
    report indices (`LineCheck.index`)."""
    chosen = [ln for ln in check.get("lines", [])
              if (ln["index"] in indices if indices is not None else ln["status"] == MISSED)]
    if indices is not None:
        unknown = set(indices) - {ln["index"] for ln in chosen}
        if unknown:
            raise ValueError(f"no checked sung line has index {sorted(unknown)}")
    spans = sorted(tuple(ln["frames"]) for ln in chosen)
    out: list[list[int]] = []
    for a, b in spans:
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out
