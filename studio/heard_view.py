"""How a take's lyrics check (engine.hearing) reads on the page: each line's mark (sung / partly / missed,
with the words heard on hover), the "most words sung first" key, the re-sing choices and a summary."""

from __future__ import annotations

import html
from typing import Any

from studio.store import DONE, TakeInfo

MARK = {"sung": "✓", "partly": "◐", "missed": "✗"}
RANDOM_NOTE = ("The test model's recogniser has random weights: it hears nothing meaningful, so these marks "
               "say nothing about this take (the flow is real).")


def check_of(t: TakeInfo | None) -> dict[str, Any] | None:
    check = (t.record or {}).get("lyrics_check") if t is not None else None
    return check if isinstance(check, dict) else None


def sung_share_of(t: TakeInfo) -> float | None:
    """Share of the checked phonemes heard (the "most words sung first" key); None: not checked."""
    check = check_of(t)
    v = check.get("sung_share") if check and check.get("lines") else None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def awaited(t: TakeInfo | None, checking: bool) -> bool:
    """Whether this take's check is still to come: finished, sung, not yet heard, and the check is on."""
    if t is None or not checking or t.status != DONE or check_of(t) is not None:
        return False
    return bool(str(t.request.get("lyrics") or "").strip())


def _line(t: TakeInfo | None, start: float, text: str) -> dict[str, Any] | None:
    """The checked line with this text nearest `start` s (a pushed line starts later than its LRC time;
    a repeated chorus line is told apart by its time)."""
    same = [ln for ln in (check_of(t) or {}).get("lines") or [] if ln.get("expected") == text]
    return min(same, key=lambda ln: abs(float(ln.get("time", 0)) - start)) if same else None


def line_attrs(t: TakeInfo | None, start: float, text: str) -> str:
    """Extra attributes of the lyric line `text` at `start` s: its status and the words heard."""
    ln = _line(t, start, text)
    if ln is None:
        return ""
    heard = ln.get("heard") or "nothing"
    tip = f"{ln['status']} ({float(ln.get('score', 0)):.0%} of its sounds heard) — heard: {heard}"
    return (f" data-status='{html.escape(str(ln['status']))}' data-heard='{html.escape(heard, quote=True)}'"
            f" title='{html.escape(tip, quote=True)}'")


def mark_of(t: TakeInfo | None, start: float, text: str) -> str:
    ln = _line(t, start, text)
    if ln is None:
        return ""
    return f"<span class='heard-mark heard-{html.escape(str(ln['status']))}'>{MARK.get(ln['status'], '')}</span> "


def summary(t: TakeInfo | None, *, test_model: bool = False) -> str:
    check = check_of(t)
    if check is None:
        return ""
    if check.get("error") or check.get("skipped"):
        return f"Lyrics check: none ({html.escape(str(check.get('error') or check.get('skipped')))})"
    lines = check.get("lines") or []
    counts = {s: sum(ln.get("status") == s for ln in lines) for s in MARK}
    per = check.get("per")
    text = (f"**Heard by {html.escape(str(check.get('model') or 'the recogniser'))}:** {counts['sung']} of "
            f"{len(lines)} lines sung, {counts['partly']} partly, {counts['missed']} missed"
            + (f" · phoneme error rate {float(per):.0%}" if per is not None else ""))
    return text + (f"\n\n{RANDOM_NOTE}" if test_model else "")


def resing_choices(t: TakeInfo | None) -> tuple[list[tuple[str, int]], list[int]]:
    """The lines a re-sing can redo (label, report index), and the ones ticked at first (the missed)."""
    lines = (check_of(t) or {}).get("lines") or []
    choices = [(f"{MARK.get(ln['status'], '')} line {ln['number']} · {_mmss(float(ln['time']))} · {ln['expected']}",
                int(ln["index"])) for ln in lines]
    return choices, [int(ln["index"]) for ln in lines if ln.get("status") == "missed"]


def _mmss(t: float) -> str:
    return f"{int(t // 60):02d}:{t % 60:05.2f}"
