"""How things look: lyric report, progress, take labels, records, waveform pictures, subtitles.

Pure functions from store/engine values to HTML, Markdown, PNG files and subtitle lists; no gradio.
"""

from __future__ import annotations

import html
import json
from typing import Any

from studio.store import CANCELLED, DONE, FAILED, INTERRUPTED, QUEUED, RUNNING, TakeInfo
from studio.takes import LiveTake

# Plain symbols (not emoji): they render with the fonts every system has, headless browsers included.
STATUS_ICON = {QUEUED: "…", RUNNING: "▶", DONE: "✓", FAILED: "⚠", CANCELLED: "■", INTERRUPTED: "‖"}
LINE_CLASS = {"sung": "ok", "end": "ok", "ignored": "muted", "pushed": "warn", "break": "muted",
              "truncated": "bad", "dropped": "bad", "unsung": "bad", "skipped": "bad"}


def lyric_report_html(layout: Any) -> str:
    """One row per input line: time, what happens to it and why; warnings under it."""
    if layout is None:
        return ""
    head = (f"<div class='lr-head'>{html.escape(layout.model)} model · {layout.duration_s:g} s · "
            f"{sum(1 for t in layout.tokens if t)} of {layout.end_frame} frames hold lyrics · "
            + ("<b class='ok'>singable as given</b>" if layout.can_sing
               else "<b class='bad'>some words will not be sung</b>") + "</div>")
    rows = []
    for r in layout.lines:
        if r.status == "ignored" and not r.raw.strip():
            continue
        when = _mmss(r.time) if r.time is not None else ""
        text = html.escape(clip(r.text or r.raw.strip(), 80))
        notes = [html.escape(r.reason)] if r.reason else []
        notes += [f"⚠ {html.escape(w)}" for w in r.warnings]
        cls = "warn" if r.warnings and LINE_CLASS.get(r.status) == "ok" else LINE_CLASS.get(r.status, "")
        rows.append(f"<tr class='{cls}'><td>{r.number}</td><td>{when}</td><td>{html.escape(r.status)}</td>"
                    f"<td>{text}<div class='lr-why'>{'<br>'.join(notes)}</div></td></tr>")
    if not any(r.tokens for r in layout.lines):
        rows.append("<tr class='muted'><td></td><td></td><td>instrumental</td><td>no lyrics will be sung</td></tr>")
    notes = "".join(f"<div class='lr-note'>{html.escape(n)}</div>" for n in layout.notes)
    return (f"<div class='lyric-report'>{head}<table><tr><th>#</th><th>time</th><th>fate</th><th>line</th></tr>"
            + "".join(rows) + f"</table>{notes}</div>")


def progress_html(lives: dict[str, LiveTake], labels: dict[str, str] | None = None) -> str:
    """A bar per take with its phase and ETA (what the musician watches while a song is made)."""
    if not lives:
        return ""
    out = []
    for tid, lv in lives.items():
        pct = int(round(lv.progress * 100))
        eta = f" · about {_dur(lv.eta_s)} left" if lv.eta_s is not None and lv.status in (QUEUED, RUNNING) else ""
        label = html.escape((labels or {}).get(tid, f"take {tid[:6]}"))
        seed = f" · seed {lv.seed}" if lv.seed is not None else ""
        out.append(
            f"<div class='take-progress {lv.status}' data-take='{tid}'>"
            f"<div class='tp-label'>{STATUS_ICON.get(lv.status, '')} {label}{seed} — "
            f"{html.escape(lv.phase)}{eta}</div>"
            f"<div class='tp-bar'><div class='tp-fill' style='transform:scaleX({pct / 100:.2f})'></div></div></div>"
        )
    return "<div id='progress-list'>" + "".join(out) + "</div>"


def style_match_of(t: TakeInfo) -> float | None:
    """The take's MuQ-MuLan cosine to its style (engine.style_match), or None when it has none."""
    sm = (t.record or {}).get("style_match")
    v = sm.get("cosine") if isinstance(sm, dict) else None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def style_match_text(t: TakeInfo) -> str:
    """One line for the take's detail: the figure and what it measures, or why it is absent."""
    v = style_match_of(t)
    if v is not None:
        return (f"**Style match {v:.2f}** (how close the take's sound is to the style you asked for, 0 to 1; it ranks "
                "the variations of one request, 1 would be the same direction)")
    sm = (t.record or {}).get("style_match")
    why = sm.get("why") if isinstance(sm, dict) else None
    return f"Style match: none ({html.escape(str(why))})" if why else ""


def style_match_caption(t: TakeInfo) -> str:
    """Plain text beside the take's waveform: the figure, or nothing when the take has none."""
    v = style_match_of(t)
    return f"Style match {v:.2f} (how close its sound is to your style; compare variations by it)" if v is not None else ""


def take_label(t: TakeInfo) -> str:
    star = "★ " if t.starred else ""
    seed = f" · seed {t.seed}" if t.seed is not None else ""
    dur = t.request.get("duration")
    dur_s = f" · {float(dur):g} s" if dur else ""
    edit = " · edit" if t.request.get("edit") else ""
    sm = style_match_of(t)
    match = f" · match {sm:.2f}" if sm is not None else ""
    return f"{star}{STATUS_ICON.get(t.status, '')} {t.label}{seed}{dur_s}{edit}{match} · {t.status}"


NO_AUDIO = {"queued": "waiting, no audio yet", "running": "being made, no audio yet (the live bar plays it)",
            "cancelled": "cancelled, no audio", "failed": "failed, no audio", "interrupted": "interrupted, no audio"}


def no_audio_label(t: TakeInfo) -> str:
    """The take player's title for a take that has no file to play."""
    return f"{t.label}: {NO_AUDIO.get(t.status, 'no audio')}"


def record_markdown(t: TakeInfo) -> str:
    """The take's full record: every parameter, the actual seed, model versions, per-stage times."""
    lines = [f"**{html.escape(t.label)}** · `{t.id}` · {t.status}" + (f" · parent `{t.parent_id}`" if t.parent_id else "")]
    if style_match_text(t):
        lines.append("\n" + style_match_text(t))
    if t.error:
        lines.append(f"\n**Error:** {html.escape(t.error)}")
    if t.status == INTERRUPTED:
        lines.append("\nThis take was interrupted when the studio stopped; **Retry** renders it again.")
    if t.timings:
        lines.append("\n| stage | seconds |\n|---|---|")
        lines += [f"| {k} | {float(v):.2f} |" for k, v in t.timings.items() if isinstance(v, (int, float))]
    rec = t.record or {"request": t.request, "seed": t.seed, "models": t.models}
    lines.append("\n```json\n" + json.dumps(rec, indent=1, default=str)[:20000] + "\n```")
    return "\n".join(lines)


def subtitles(t: TakeInfo) -> list[dict[str, Any]] | None:
    """Timed lyrics for the player: one cue per sung line, until the next line (or +4 s)."""
    report = (t.record or {}).get("lyrics_report") or (t.record or {}).get("lyrics", {}).get("lines") or []
    timed = [(float(r["time"]), str(r.get("text") or "")) for r in report
             if isinstance(r, dict) and r.get("time") is not None and r.get("text")
             and r.get("status") not in ("dropped", "skipped", "unsung")]
    if not timed:
        return None
    timed.sort()
    return [{"text": text, "timestamp": [start, timed[i + 1][0] if i + 1 < len(timed) else start + 4.0]}
            for i, (start, text) in enumerate(timed)]


def lyric_lines_html(t: TakeInfo | None) -> str:
    """The take's timed lyrics as lines the page highlights while it plays (assets/ui/studio.js);
    clicking one seeks the player there."""
    cues = subtitles(t) if t is not None else None
    if not cues:
        return ""
    from studio.heard_view import line_attrs, mark_of  # each line's lyrics-check mark, heard words on hover

    rows = "".join(f"<button class='lrc-line' data-t='{c['timestamp'][0]:.2f}'{line_attrs(t, c['timestamp'][0], c['text'])}>"
                   f"<span class='lrc-t'>{_mmss(c['timestamp'][0])}</span> {mark_of(t, c['timestamp'][0], c['text'])}"
                   f"{html.escape(c['text'])}</button>" for c in cues)
    return ("<div class='lrc-lines' title='The line being sung is lit; click a line to hear it'>"
            f"{rows}</div>")


def ab_html(pair: list[tuple[str, str]]) -> str:
    """Two players for A/B (label, URL); B starts muted and the toggle swaps which one is heard at the
    same playhead (assets/ui/studio.js keeps them in step)."""
    (la, ua), (lb, ub) = pair
    return (f"<div class='ab'><div><b>A</b> {html.escape(la)}<audio id='ab-a' controls preload='auto' "
            f"src='{html.escape(ua)}'></audio></div><div><b>B</b> {html.escape(lb)}<audio id='ab-b' controls "
            f"preload='auto' muted src='{html.escape(ub)}'></audio></div>"
            "<button id='ab-toggle' type='button'>Hearing A — switch to B</button></div>")


def clip(text: str, n: int) -> str:
    """At most `n` characters; a cut line ends with "…" so it reads as cut."""
    return text if len(text) <= n else text[: n - 1] + "…"


def _mmss(t: float) -> str:
    return f"{int(t // 60):02d}:{t % 60:05.2f}"


def _dur(s: float) -> str:
    return f"{s:.0f} s" if s < 90 else f"{s / 60:.1f} min"


__all__ = ["lyric_report_html", "progress_html", "take_label", "style_match_of", "style_match_text", "record_markdown", "subtitles", "lyric_lines_html",
           "DONE", "FAILED", "CANCELLED"]
