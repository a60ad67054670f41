"""Timing helper: plain lyrics (with optional [Verse]/[Chorus]/... tags) + a duration -> a timed LRC.

The plan is arithmetic on phoneme counts, so it is deterministic and every number can be explained:

1. each lyric line's phoneme count `n` comes from the same g2p as the layout (plus its period);
2. its natural span is `max(MIN_LINE_S, n / SING_RATE)` seconds, rounded up to whole beats when a
   tempo is given;
3. the song is intro + sections (lines back to back) + short instrumental breaks between sections +
   an outro. The intro defaults to 4 bars at the tempo (or 8 % of the song, 3-12 s), the outro to the
   same; between sections a break of 2 bars (or 2 s);
4. if the lines do not fit, breaks, then outro, then intro shrink, then every line is compressed evenly
   down to its hard minimum (`n` frames plus one spare frame: no line can overrun the next one);
   if even that does not fit, `ValueError` says how much time the lyrics need;
5. if there is time to spare, lines stretch up to `MAX_STRETCH` times their natural span and no more
   (long gaps invite repetition); the rest becomes longer section breaks and outro;
6. each section ends with an empty timed line (a break: the voice stops there instead of repeating),
   and the last one is the end marker the base (95 s) model needs: it drops the last line of its LRC.

Timestamps are written as `[mm:ss.xx]`, rounded up to the centisecond, then checked frame by frame
against the layout rule (`int(t * 44100 / 2048)`); a line that would still overlap is nudged later.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from device_worker.shapes import FRAME_RATE, max_frames_for, seconds_to_frame
from engine.lyrics.g2p import LyricTokenizer
from engine.lyrics.lrc import format_time

SING_RATE = 8.0  # phonemes per second of a comfortable sung line
MIN_LINE_S = 1.5
MAX_STRETCH = 1.6
SPARE_FRAMES = 1  # frames kept free after each line's tokens
END_MARGIN_S = 0.5  # the end marker sits at least this far before the song end

_TAG = re.compile(r"^\s*\[\s*([A-Za-z][A-Za-z _'-]*?)\s*(\d*)\s*\]\s*$")
_TIMESTAMPS = re.compile(r"^(\s*\[\d{1,3}:\d{1,2}(?:[.:]\d{1,3})?\])+")
_METADATA = re.compile(r"^\s*\[[A-Za-z#]+\s*:.*\]\s*$")


@dataclass
class PlannedLine:
    text: str
    section: str
    phonemes: int  # g2p tokens + the period
    natural_s: float
    start_s: float = 0.0
    span_s: float = 0.0


@dataclass
class TimingPlan:
    lines: list[PlannedLine]
    duration_s: float
    intro_s: float
    outro_s: float
    break_s: float
    lrc: str = ""
    explanation: list[str] = field(default_factory=list)


def _sections(plain: str) -> list[tuple[str, list[str]]]:
    """[(section name, lines)]; tags start sections, blank lines split untagged stanzas."""
    out: list[tuple[str, list[str]]] = []
    name, lines, count = "", [], 0
    text = plain.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    for raw in text.split("\n"):
        m = _TAG.match(raw)
        if m:
            if lines:
                out.append((name, lines))
            name, lines = f"{m.group(1).strip().title()} {m.group(2)}".strip(), []
            continue
        if _METADATA.match(raw):
            continue
        line = _TIMESTAMPS.sub("", raw).strip()  # an LRC given to the helper is re-timed
        if not line:
            if lines:
                out.append((name, lines))
                lines = []
                count += 1
                name = f"Stanza {count + 1}"
            continue
        lines.append(line)
    if lines:
        out.append((name, lines))
    return [(n or f"Stanza {k + 1}", ls) for k, (n, ls) in enumerate(out)]


def _hard_s(phonemes: int) -> float:
    return (phonemes + SPARE_FRAMES + 1) / FRAME_RATE


def plan_timing(plain_text: str, duration_s: float, *, tempo_bpm: float | None = None,
                intro_s: float | None = None, tokenizer: LyricTokenizer | None = None) -> TimingPlan:
    """Plan the timing; `plan.lrc` is the timed LRC. Raises ValueError when the lyrics cannot fit."""
    max_frames_for(duration_s)  # validates the duration (95 or 96-285 s)
    if tempo_bpm is not None and not 30 <= tempo_bpm <= 300:
        raise ValueError(f"tempo {tempo_bpm!r} BPM is outside 30-300")
    if intro_s is not None and not 0 <= intro_s < duration_s:
        raise ValueError(f"intro {intro_s!r} s must be between 0 and the song length")
    from engine.lyrics.layout import default_tokenizer

    tok = tokenizer or default_tokenizer()
    beat = 60.0 / tempo_bpm if tempo_bpm else None
    sections = _sections(plain_text)
    planned: list[list[PlannedLine]] = []
    for name, lines in sections:
        group = []
        for text in lines:
            n = len(tok.encode(text).tokens) + 1
            natural = max(MIN_LINE_S, n / SING_RATE, _hard_s(n))
            if beat:
                natural = math.ceil(natural / beat - 1e-9) * beat
            group.append(PlannedLine(text, name, n, natural))
        planned.append(group)
    flat = [p for g in planned for p in g]
    default_edge = 16 * beat if beat else min(12.0, max(3.0, 0.08 * duration_s))
    intro = intro_s if intro_s is not None else min(default_edge, 0.2 * duration_s)
    outro = min(default_edge, 0.2 * duration_s)
    brk = 8 * beat if beat else 2.0
    plan = TimingPlan(flat, float(duration_s), intro, outro, brk)
    if not flat:
        plan.explanation.append("no lyric lines: instrumental (empty LRC)")
        return plan
    gaps = len(planned) - 1
    usable = duration_s - END_MARGIN_S
    natural_total = sum(p.natural_s for p in flat)
    hard_total = sum(_hard_s(p.phonemes) for p in flat)
    # 4. shrink the padding first, then the lines
    while intro + outro + gaps * brk + natural_total > usable and (brk > 0.5 or outro > 1.0 or intro > 1.0):
        if brk > 0.5 and gaps:
            brk = max(0.5, brk / 2)
        elif outro > 1.0:
            outro = max(1.0, outro / 2)
        elif intro > 1.0 and intro_s is None:
            intro = max(1.0, intro / 2)
        else:
            break
    room = usable - intro - outro - gaps * brk
    if hard_total > room:
        need = hard_total + intro + outro + gaps * brk + END_MARGIN_S
        raise ValueError(f"these lyrics need at least {need:.1f} s ({sum(p.phonemes for p in flat)} phonemes) "
                         f"but the song is {duration_s:g} s: shorten them or choose a longer song")
    spans = _fit([p.natural_s for p in flat], [_hard_s(p.phonemes) for p in flat], room)
    spare = room - sum(spans)
    if spare > 0 and gaps:  # 5. whatever lines may not take goes to breaks, then to the outro
        extra = min(spare / 2, gaps * 8.0) / gaps
        brk += extra
        spare -= extra * gaps
    outro += max(spare, 0.0)
    for p, s in zip(flat, spans, strict=True):
        p.span_s = s
    plan.intro_s, plan.outro_s, plan.break_s = intro, outro, brk
    _write(plan, planned, tempo_bpm)
    return plan


def _fit(natural: list[float], hard: list[float], room: float) -> list[float]:
    """Scale spans to fill at most `room`: compress evenly (never below `hard`) or stretch up to MAX_STRETCH."""
    total = sum(natural)
    if total <= room:
        scale = min(MAX_STRETCH, room / total)
        return [s * scale for s in natural]
    spans = list(natural)
    fixed = [False] * len(spans)
    for _ in range(len(spans) + 1):  # water-filling: lines at their floor stop shrinking
        free = sum(s for s, f in zip(natural, fixed, strict=True) if not f)
        budget = room - sum(h for h, f in zip(hard, fixed, strict=True) if f)
        scale = budget / free if free else 1.0
        changed = False
        for i, (s, h) in enumerate(zip(natural, hard, strict=True)):
            if not fixed[i]:
                spans[i] = s * scale
                if spans[i] < h:
                    fixed[i], spans[i], changed = True, h, True
        if not changed:
            break
    return spans


def _ceil_cs(t: float) -> float:
    return math.ceil(round(t * 100, 6)) / 100


def _write(plan: TimingPlan, planned: list[list[PlannedLine]], tempo_bpm: float | None) -> None:
    rows: list[str] = []
    t = plan.intro_s
    prev_end_frame = 0
    for k, group in enumerate(planned):
        rows.append(f"[{group[0].section}]")
        for p in group:
            start = max(_ceil_cs(t), 0.0)
            while seconds_to_frame(start) < prev_end_frame:  # never let the previous line overrun this one
                start = round(start + 0.01, 2)
            p.start_s = start
            prev_end_frame = seconds_to_frame(start) + p.phonemes
            rows.append(f"[{format_time(start)}]{p.text}")
            t = max(t + p.span_s, start + p.span_s)
        stop = max(_ceil_cs(t), 0.0)
        while seconds_to_frame(stop) < prev_end_frame:
            stop = round(stop + 0.01, 2)
        if stop >= plan.duration_s:
            raise ValueError(f"these lyrics run to {stop:.2f} s, past the {plan.duration_s:g} s song")
        rows.append(f"[{format_time(stop)}]")  # the voice stops here (a break, the end marker at the end)
        prev_end_frame = seconds_to_frame(stop) + 1
        t = stop + (plan.break_s if k + 1 < len(planned) else 0.0)
    plan.lrc = "\n".join(rows) + "\n"
    tempo = f", {tempo_bpm:g} BPM (line spans rounded up to whole beats)" if tempo_bpm else ""
    plan.explanation = [
        f"{plan.duration_s:g} s song{tempo}: intro {plan.intro_s:.1f} s, breaks {plan.break_s:.1f} s, "
        f"outro about {plan.outro_s:.1f} s; {SING_RATE:g} phonemes/s is the natural pace",
        *(f"{format_time(p.start_s)}  {p.phonemes:3d} phonemes  {p.span_s:5.2f} s "
          f"({p.phonemes / p.span_s:4.1f}/s)  {p.text}" for p in plan.lines),
    ]


def time_lyrics(plain_text: str, duration_s: float, *, tempo_bpm: float | None = None,
                intro_s: float | None = None, tokenizer: LyricTokenizer | None = None) -> str:
    """A timed LRC for plain lyrics (see module docstring). Raises ValueError when they cannot fit.
    `tokenizer`: the g2p the takes will use (the studio's; default: the model files' own)."""
    return plan_timing(plain_text, duration_s, tempo_bpm=tempo_bpm, intro_s=intro_s, tokenizer=tokenizer).lrc
