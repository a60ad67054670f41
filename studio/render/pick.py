"""`best_of`: which of a job's variations sang its lyrics best (the lowest PER of the lyrics check)."""

from __future__ import annotations

from typing import Any


def check_summary(check: dict[str, Any] | None) -> dict[str, Any] | None:
    """What render.json and the manifest say of a take's `lyrics_check` (the full check is in the take's
    own record): model, PER, share of phonemes heard, the missed lines; or why there is none."""
    if check is None:
        return None
    out = {k: check[k] for k in ("model", "per", "sung_share", "error", "skipped") if k in check}
    out["missed"] = [ln["index"] for ln in check.get("lines", []) if ln.get("status") == "missed"]
    return out


def pick(takes: list[dict[str, Any]]) -> dict[str, Any]:
    """{"take": the take with the lowest PER (ties: the earlier take), "per", "why"}; take None when no
    take was checked (the check off, or it failed: the reason is in each take's lyrics_check)."""
    scored = [(t["lyrics_check"]["per"], t["take"]) for t in takes
              if t.get("lyrics_check") and t["lyrics_check"].get("per") is not None]
    if not scored:
        return {"take": None, "per": None, "why": "no take has a lyrics check"}
    per, take = min(scored)
    return {"take": take, "per": per, "why": f"lowest PER of {len(scored)} checked take(s)"}
