"""The per-line lyric report: what happens to each input line, why, and what to watch out for.

Statuses (`LineReport.status`):

* `sung`      - placed at its own time;
* `pushed`    - placed later than its time because the line before it was still running (upstream
                behaviour; the report says by how much);
* `truncated` - cut at the song end (some phonemes lost);
* `dropped`   - not sung at all: it starts at or after the song end, an earlier line already fills the
                song to its end, or it is the base model's last line (upstream uses the last timestamp of
                a 95 s song as the end marker and never sings its text);
* `end`       - an empty last line on the base model: the end marker, exactly as intended;
* `break`     - an empty/punctuation-only timed line: only the end-of-line mark is placed, so the voice
                pauses there (upstream crashes on such lines);
* `unsung`    - text in a script the model has no symbols for (kana, hangul, ...): only the end-of-line
                mark is placed (upstream crashes);
* `skipped`   - a line with words but no timestamp the parser reads (upstream skips it silently);
* `ignored`   - blank lines, metadata and section tags (nothing to sing, nothing lost).

`can_sing` is False when any words are lost: dropped, truncated, unsung or skipped lines.

Warnings, from the studio's experience with DiffRhythm timing (upstream issue #27): a line whose
phonemes need more frames than there are before the next timestamp is *rushed* (the next line is pushed
and words tend to be skipped); a line singing faster than `TIGHT_RATE` phonemes per second is *tight*;
a line followed by much more time than its phonemes need (`LONG_GAP_S` beyond a relaxed
`RELAXED_RATE` phonemes per second) invites the model to repeat words: end it with an empty timed line.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from device_worker.shapes import FRAME_RATE

SUNG, PUSHED, TRUNCATED, DROPPED, END, BREAK, UNSUNG, SKIPPED, IGNORED = (
    "sung", "pushed", "truncated", "dropped", "end", "break", "unsung", "skipped", "ignored")
LOSES_WORDS = frozenset({DROPPED, TRUNCATED, UNSUNG, SKIPPED})

TIGHT_RATE = 14.0  # phonemes per second above which singers (and the model) start skipping words
RELAXED_RATE = 4.0  # a slow, stretched delivery: below this the line is padded with silence
LONG_GAP_S = 8.0  # seconds of slack beyond a relaxed delivery that invite repetition


@dataclass
class LineReport:
    number: int  # line number in the file (1-based)
    raw: str
    status: str
    reason: str = ""
    time: float | None = None
    text: str = ""
    tokens: list[int] = field(default_factory=list)  # g2p model ids, without the appended period
    frame: int | None = None  # the frame the timestamp asks for
    start_frame: int | None = None  # where the line really starts
    placed: int = 0  # tokens written (including the period)
    lost: int = 0  # tokens cut at the song end
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def clip(text: str, n: int) -> str:
    """At most `n` characters; a cut line ends with "…" so it reads as cut."""
    return text if len(text) <= n else text[: n - 1] + "…"


def mmss(t: float) -> str:
    t = max(t, 0.0)
    return f"{int(t // 60):02d}:{t % 60:05.2f}"


def timing_warnings(lines: list[LineReport], end_frame: int) -> list[str]:
    """Add rushed/tight/long-gap warnings to placed lines; return them as song-level strings too."""
    # the base model's end marker is not placed, but its timestamp still ends the line before it
    marks = [r for r in lines if (r.start_frame is not None and r.status != IGNORED) or r.status == END]
    placed = [r for r in marks if r.status != END]
    out: list[str] = []
    for line in placed:
        later = marks[marks.index(line) + 1:]
        nxt = later[0] if later else None
        limit = nxt.frame if nxt is not None and nxt.frame is not None else end_frame
        limit = max(limit, line.start_frame)
        needed = len(line.tokens) + 1
        room = limit - line.start_frame
        span_s = room / FRAME_RATE
        backwards = nxt is not None and nxt.time is not None and line.time is not None and nxt.time < line.time
        if nxt is not None and not backwards and line.start_frame + needed > limit and line.status in (SUNG, PUSHED):
            over = line.start_frame + needed - limit
            line.warnings.append(
                f"rushed: {needed} phoneme frames but only {room} before the next line at {mmss(nxt.time or 0)}; "
                f"the next line starts {over} frames ({over / FRAME_RATE:.2f} s) late")
        elif line.tokens and span_s > 0 and len(line.tokens) / span_s > TIGHT_RATE:
            line.warnings.append(
                f"tight: {len(line.tokens)} phonemes in {span_s:.2f} s ({len(line.tokens) / span_s:.1f}/s); "
                "words may be skipped: give it more time")
        # Before an end marker the voice stops at the marker: the silence after it is the song's ending.
        if line.tokens and line.status in (SUNG, PUSHED, TRUNCATED) and not (nxt is not None and nxt.status == END):
            slack = span_s - len(line.tokens) / RELAXED_RATE
            if slack > LONG_GAP_S:
                what = "the next line" if nxt is not None else "the song end"
                line.warnings.append(
                    f"long gap: {span_s:.1f} s until {what} for a short line; the voice may repeat words "
                    "to fill it: add an empty timed line where the voice should stop")
        out.extend(f"line {line.number}: {w}" for w in line.warnings)
    return out


def render_text(layout) -> str:  # layout: engine.lyrics.layout.LyricLayout (avoid an import cycle)
    """Human-readable report, one line per input line, then warnings and a verdict."""
    rows = [f"{layout.model} model, {layout.duration_s:g} s: {layout.end_frame} frames; "
            f"{sum(1 for t in layout.tokens if t)} frames hold lyrics"]
    for r in layout.lines:
        when = f"{mmss(r.time)}" if r.time is not None else "     -  "
        where = f" @{r.start_frame}" if r.start_frame is not None else ""
        text = r.text if r.text else r.raw.strip()
        rows.append(f"{r.number:4d}  {when}  {r.status:<9}{where:>7}  {clip(text, 60)}")
        if r.reason:
            rows.append(f"{'':6}{r.reason}")
        for w in r.warnings:
            rows.append(f"{'':6}warning: {w}")
    for note in layout.notes:
        rows.append(f"note: {note}")
    if not any(r.tokens for r in layout.lines):
        rows.append("instrumental: no lyrics will be sung")
    rows.append("verdict: " + ("singable as given" if layout.can_sing
                               else "some words will not be sung (see dropped/truncated/skipped/unsung lines)"))
    return "\n".join(rows)
