"""What a musician asks for: one song request, and its validation before anything is queued.

A request is plain data (it round-trips through JSON for records, the studio's database and the batch
renderer's JSONL). `validate()` names every problem at once, the per-line lyric report included, so a
musician fixes everything in one go instead of one error per submit.
"""

from __future__ import annotations

import logging
import re
import secrets
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from device_worker import controls, shapes

logger = logging.getLogger(__name__)

FORMATS = ("wav", "flac", "mp3", "ogg")
# The ranges live in device_worker.controls (both processes read them).
MAX_SEED = int(controls.SEED.hi)  # torch.manual_seed takes any uint64; 32 bits keeps seeds readable
MAX_LYRICS_CHARS = 200_000

# An LRC timestamp anywhere at the start of a line: `[m:ss]`, `[mm:ss.xx]`, `[mm:ss.xxx]`.
_LRC_STAMP = re.compile(r"^\s*\[\d{1,3}:\d{1,2}(?:[.:]\d{1,3})?\]", re.MULTILINE)


def lyrics_problem(lyrics: Any, duration: Any) -> str | None:
    """What is wrong with lyrics and a song length before any layout work is spent on them (None: fine).

    Every entry point that lays lyrics out (the page's live report, the API, `studio lyrics check`) checks
    this first, so an oversized or malformed input costs nothing."""
    import math

    if not isinstance(lyrics, str):
        return "lyrics must be text"
    if len(lyrics) > MAX_LYRICS_CHARS:
        return f"lyrics are {len(lyrics):,} characters; the limit is {MAX_LYRICS_CHARS:,}"
    if isinstance(duration, bool) or not isinstance(duration, (int, float)) or not math.isfinite(duration):
        return f"duration must be a number of seconds, got {duration!r}"
    try:
        shapes.max_frames_for(duration)
    except ValueError as exc:
        return str(exc)
    return None


class ValidationError(ValueError):
    """A request that cannot be run; `.problems` names every reason (field + message)."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        super().__init__("invalid request: " + "; ".join(str(p) for p in self.problems))


@dataclass(frozen=True)
class Problem:
    field: str
    message: str
    line: int | None = None  # lyric line number (1-based) when the problem is one line of the lyrics

    def __str__(self) -> str:
        where = f"{self.field} line {self.line}" if self.line is not None else self.field
        return f"{where}: {self.message}"


@dataclass(frozen=True)
class Style:
    """Exactly one of: a text prompt, a reference recording, or a saved 512-d embedding (.npy)."""

    text: str | None = None
    audio: str | None = None
    embedding: str | None = None

    @property
    def kind(self) -> str:
        return "text" if self.text is not None else "audio" if self.audio is not None else "embedding"

    def problems(self) -> list[Problem]:
        given = [k for k in ("text", "audio", "embedding") if getattr(self, k) is not None]
        if len(given) != 1:
            return [Problem("style", f"give exactly one of text, audio or embedding (got {given or 'none'})")]
        out: list[Problem] = []
        if self.text is not None and not self.text.strip():
            out.append(Problem("style.text", "the style prompt is empty"))
        for key in ("audio", "embedding"):
            path = getattr(self, key)
            if path is not None and not Path(path).is_file():
                out.append(Problem(f"style.{key}", f"file not found: {Path(path).name}"))  # no server paths
        if self.embedding is not None and not str(self.embedding).endswith(".npy"):
            out.append(Problem("style.embedding", "a saved style is a .npy file holding a 512-d vector"))
        if self.audio is not None and Path(self.audio).is_file():
            out += _reference_problems(self.audio)
        return out


def _reference_problems(path: str) -> list[Problem]:
    """A style recording MuQ-MuLan cannot hear is refused before queueing (too short, unreadable)."""
    import soundfile as sf

    from engine.style import StyleError, choose_window

    try:
        info = sf.info(str(path))
        choose_window(info.frames / info.samplerate if info.samplerate else 0.0)
    except StyleError as exc:
        return [Problem("style.audio", str(exc))]
    except Exception:  # noqa: BLE001 - libsndfile's message names the server path
        return [Problem("style.audio", f"{Path(path).name} is not an audio file this studio can read")]
    return []


@dataclass(frozen=True)
class Reference:
    """Edit or continue an existing song: regenerate `segments` (seconds, -1 = song start/end) and keep
    the rest of the reference's latent, as upstream's `--edit --ref-song --edit-segments`."""

    song: str
    segments: tuple[tuple[float, float], ...] = ()  # continuation with no segments: from the song's end
    mode: Literal["edit", "continue"] = "edit"
    # The source file's own samples outside the segments (engine.splice; the re-sing edit), not the decode
    # of its latent: the take then differs from its source only inside them.
    splice: bool = False

    @classmethod
    def edit(cls, song: str | Path, segments: list[tuple[float, float]] | list[list[float]],
             splice: bool = False) -> Reference:
        return cls(str(song), tuple((float(a), float(b)) for a, b in segments), "edit", splice)

    @classmethod
    def continuation(cls, song: str | Path, from_s: float | None = None) -> Reference:
        """Keep the song up to `from_s` seconds (default: all of it) and generate the rest (`[[s, -1]]`)."""
        return cls(str(song), () if from_s is None else ((float(from_s), -1.0),), "continue")

    def problems(self, duration_s: float) -> list[Problem]:
        out: list[Problem] = []
        if not Path(self.song).is_file():
            out.append(Problem("edit.song", f"file not found: {Path(self.song).name}"))
        if not self.segments and self.mode == "edit":
            out.append(Problem("edit.segments", "give at least one [start, end] range to regenerate"))
        for i, (start, end) in enumerate(self.segments):
            name = f"edit.segments[{i}]"
            if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and x == x and abs(x) != float("inf")
                       for x in (start, end)):
                out.append(Problem(name, f"times must be finite numbers of seconds: {[start, end]}"))
            elif (start < 0 and start != -1) or (end < 0 and end != -1):
                out.append(Problem(name, f"times are seconds >= 0, or -1 for the song start/end: {[start, end]}"))
            elif start != -1 and end != -1 and end <= start:
                out.append(Problem(name, f"end {end} s is not after start {start} s"))
            elif start != -1 and start >= duration_s:
                out.append(Problem(name, f"starts at {start} s, at or past the song's end ({duration_s} s)"))
        return out


@dataclass(frozen=True)
class SongRequest:
    """One song. `lyrics` is LRC, plain text (timed by the timing helper) or empty (instrumental)."""

    lyrics: str = ""
    style: Style = field(default_factory=lambda: Style(text="pop"))
    duration: float = shapes.BASE_SECONDS
    steps: int = int(controls.STEPS.default)
    cfg: float = controls.CFG.default
    seed: int | None = None  # None: a random seed, drawn once at submit and recorded
    variations: int = int(controls.VARIATIONS.default)  # takes of the same request; take i uses seed + i
    edit: Reference | None = None
    formats: tuple[str, ...] = ("wav",)
    title: str = ""
    lyrics_format: Literal["auto", "lrc", "plain"] = "auto"
    # Lines the model cannot sing (past the song end, say) are an error unless the musician accepts it.
    allow_dropped_lines: bool = False

    def __post_init__(self) -> None:
        # Friendly shorthand: a string style is a text prompt; lists become tuples (hashable, frozen).
        if isinstance(self.style, str):
            object.__setattr__(self, "style", Style(text=self.style))
        if isinstance(self.formats, (list, str)):
            fmts = [self.formats] if isinstance(self.formats, str) else self.formats
            object.__setattr__(self, "formats", tuple(fmts))

    # -- derived values ---------------------------------------------------------------------------
    @property
    def model_variant(self) -> Literal["base", "full"]:
        return "base" if shapes.max_frames_for(self.duration) == shapes.BASE_FRAMES else "full"

    @property
    def instrumental(self) -> bool:
        return not self.lyrics.strip()

    @property
    def is_lrc(self) -> bool:
        if self.lyrics_format != "auto":
            return self.lyrics_format == "lrc"
        return bool(_LRC_STAMP.search(self.lyrics))

    def output_formats(self) -> tuple[str, ...]:
        """WAV is always written (the master); the others on request, in a stable order."""
        wanted = {f.lower() for f in self.formats} | {"wav"}
        return tuple(f for f in FORMATS if f in wanted)

    def seeds(self) -> list[int]:
        """Each take's seed. Only meaningful once `seed` is set (see `with_seed`)."""
        if self.seed is None:
            raise ValueError("the request has no seed yet: call with_seed() first")
        return [(self.seed + i) % (MAX_SEED + 1) for i in range(self.variations)]

    def with_seed(self) -> SongRequest:
        """This request with its seed fixed (drawn at random when absent), so it can be recorded and replayed."""
        if self.seed is not None:
            return self
        return replace(self, seed=secrets.randbelow(MAX_SEED + 1))

    # -- validation -------------------------------------------------------------------------------
    def validate(self, *, tokenizer: Any = None, layout: bool = True) -> Validation:
        """Every problem with this request, and the lyric layout (with its per-line report) when the
        lyrics could be laid out. Never raises for a bad request; the caller decides."""
        problems: list[Problem] = []
        duration_ok = True
        try:
            shapes.max_frames_for(self.duration)
        except ValueError as exc:
            duration_ok = False
            problems.append(Problem("duration", str(exc)))
        for control in (controls.STEPS, controls.CFG, controls.VARIATIONS):
            why = control.problem(getattr(self, control.name))
            if why:
                problems.append(Problem(control.name, why))
        if self.seed is not None and (why := controls.SEED.problem(self.seed)):
            problems.append(Problem("seed", why))
        unknown = [f for f in self.formats if str(f).lower() not in FORMATS]
        if unknown:
            problems.append(Problem("formats", f"unknown {unknown}; choose from {list(FORMATS)}"))
        if len(self.lyrics) > MAX_LYRICS_CHARS:
            problems.append(Problem("lyrics", f"{len(self.lyrics)} characters; the limit is {MAX_LYRICS_CHARS}"))
        problems += self.style.problems()
        if self.edit is not None:
            problems += self.edit.problems(self.duration if duration_ok else shapes.FULL_MAX_SECONDS)
        lyric_layout = None
        if layout and duration_ok and len(self.lyrics) <= MAX_LYRICS_CHARS:
            try:
                lyric_layout = layout_request_lyrics(self, tokenizer=tokenizer)
            except Exception as exc:  # a lyric layout crash is this request's problem, not the engine's
                problems.append(Problem("lyrics", f"{type(exc).__name__}: {exc}"))
            else:
                problems += lyric_problems(lyric_layout, allow_dropped=self.allow_dropped_lines)
        return Validation(problems, lyric_layout)

    # -- (de)serialisation ------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["formats"] = list(self.formats)
        if self.edit is not None:
            d["edit"]["segments"] = [list(s) for s in self.edit.segments]
            if not self.edit.splice:  # absent unless asked: older records and render identities stay as they were
                d["edit"].pop("splice")
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SongRequest:
        d = dict(d)
        style = d.pop("style", None)
        if isinstance(style, dict):
            d["style"] = Style(**style)
        elif style is not None:
            d["style"] = Style(text=str(style))
        edit = d.pop("edit", None)
        if edit:
            d["edit"] = Reference(edit["song"], tuple(tuple(map(float, s)) for s in edit["segments"]),
                                  edit.get("mode", "edit"), bool(edit.get("splice", False)))
        if "formats" in d:
            d["formats"] = tuple(d["formats"])
        return cls(**d)


@dataclass
class Validation:
    problems: list[Problem]
    layout: Any = None  # engine.lyrics.LyricLayout when the lyrics could be laid out

    @property
    def ok(self) -> bool:
        return not self.problems

    def raise_if_invalid(self) -> None:
        if self.problems:
            raise ValidationError(self.problems)


def layout_request_lyrics(request: SongRequest, *, tokenizer: Any = None) -> Any:
    """Lay the request's lyrics out on the frame grid (plain lyrics are timed first)."""
    # Lazy: the lyric helper pulls phonemizer/jieba, and the timing helper only matters for plain text.
    from engine.lyrics.layout import layout_lyrics

    text = request.lyrics
    if text.strip() and not request.is_lrc:
        from engine.lyrics.timing import time_lyrics

        text = time_lyrics(text, request.duration)
    text, note = with_end_marker(text, request.duration, tokenizer)
    layout = layout_lyrics(text, request.duration, tokenizer=tokenizer)
    if note:
        layout.notes.append(note)
    return layout


END_MARKER_GAP_S = 0.5  # after the last line's phonemes, before the marker


def with_end_marker(text: str, duration: float, tokenizer: Any = None) -> tuple[str, str | None]:
    """The base (95 s) model never sings the last timed line of its LRC: it is the end marker, whose
    time only ends the line before it (upstream drops a sung last line silently). A musician's file ends with a sung line, so when it does, the marker is
    added after that line: at its start + one frame per phoneme (the layout's own pace) + a short gap,
    before the song's end. Returns the text to lay out and the note saying so (None: nothing added)."""
    from engine.lyrics.lrc import LYRIC, format_time, parse_lrc
    from engine.lyrics.timing import END_MARGIN_S

    if shapes.max_frames_for(duration) != shapes.BASE_FRAMES:
        return text, None
    timed = [p for p in parse_lrc(text) if p.kind == LYRIC and p.time is not None and p.time < duration]
    if not timed or not timed[-1].text.strip():
        return text, None  # no lines, or the musician placed the marker already
    last = timed[-1]
    if tokenizer is None:
        from engine.lyrics.layout import default_tokenizer

        tokenizer = default_tokenizer()
    phonemes = len(tokenizer.encode(last.text).tokens) + 1  # + the line's closing period
    at = min(last.time + phonemes / shapes.FRAME_RATE + END_MARKER_GAP_S, duration - END_MARGIN_S)
    if at <= last.time:
        return text, None  # no room after it: the report says the line is the marker
    marker = f"[{format_time(at)}]"
    note = (f"end marker added at {marker[1:-1]}, after your last line, so that line is sung: the 95 s model "
            "never sings the last timed line, it only marks where the line before it ends. Add your own empty "
            "timed line to place it yourself.")
    return text.rstrip("\n") + "\n" + marker + "\n", note


def lyric_problems(layout: Any, *, allow_dropped: bool) -> list[Problem]:
    """Lines the model would not sing (dropped, cut, unsung, skipped), one problem per line, from the
    layout's per-line report. Warnings (rushed lines, long gaps) are not problems: the studio shows them."""
    if allow_dropped or layout.can_sing:
        return []
    from engine.lyrics.report import LOSES_WORDS

    out = [Problem("lyrics", f"{r.status}: {r.reason or r.raw.strip()}", line=r.number)
           for r in layout.lines if r.status in LOSES_WORDS]
    return out or [Problem("lyrics", "some words cannot be sung: " + "; ".join(layout.warnings))]
