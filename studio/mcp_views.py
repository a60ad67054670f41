"""How a take reads to an agent (MCP tools): a short summary with absolute, signed, owner-bound URLs.

The API's `/take` answers with everything (`studio.api`); a model acting on a tool's answer needs less:
the id, status, seed, where to download the audio and what was asked for. Nothing here names a server
path (`access.public`), and every URL is `access.signed_file_url`'s, so it stops working as soon as the
owner deletes the take.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from studio import access
from studio.progress import read_record
from studio.store import TakeInfo

if TYPE_CHECKING:
    from studio.services import Services


def base_url(request: Any) -> str:
    """`http://host:port` the caller reached the studio at (its Host header; "" when unknown, and then
    the URLs stay relative to the studio)."""
    try:
        headers = {k.lower(): v for k, v in dict(request.headers).items()}
    except Exception:  # noqa: BLE001 - no request, no headers: relative URLs
        return ""
    host = headers.get("x-forwarded-host") or headers.get("host") or ""
    proto = headers.get("x-forwarded-proto") or "http"
    # A Host header is the client's word: only a plain host[:port] goes into the URLs handed back.
    if not host or any(c in host for c in "/\\@?# ") or proto not in ("http", "https"):
        return ""
    return f"{proto}://{host}"


def record_of(take: TakeInfo) -> dict[str, Any]:
    """The take's record: the store's copy, or the JSON file next to the audio (which later additions,
    such as the lyrics check, are written into)."""
    on_disk = read_record(take.files.get("json")) if take.files.get("json") else {}
    return {**(take.record or {}), **on_disk}


def style_text(request: dict[str, Any]) -> str:
    style = request.get("style") or {}
    if style.get("text") is not None:
        return str(style["text"])
    if style.get("audio"):
        return "reference audio"
    return "saved style" if style.get("embedding") else ""


def summary(take: TakeInfo, svc: Services, owner: str, base: str) -> dict[str, Any]:
    """One take for an agent: id, status, seed, `audio_url` (WAV), `urls` of every file, and the
    record's essentials (what was asked, what was made)."""
    who = access.Who(owner)
    urls = {kind: base + url for kind, url in access.file_urls(svc.store, svc.identity, take, who).items()}
    req = take.request or {}
    record = record_of(take) if take.status == "done" else {}
    effective = record.get("effective") or {}
    report = record.get("lyrics_report") or []
    edit = req.get("edit") or None
    out: dict[str, Any] = {
        "take_id": take.id,
        "session_id": take.session_id,
        "name": take.label,
        "status": take.status,
        "phase": take.phase,
        "progress": round(float(take.progress or 0.0), 3),
        "seed": take.seed,
        "variation": take.variation,
        "parent_id": take.parent_id,
        "deleted": take.deleted,  # deleted on the page: its URLs answer 404 until it is undeleted
        "created": take.created_at.isoformat() + "Z",
        "error": take.error,
        "audio_url": urls.get("wav"),
        "urls": urls,
        "record": {
            "title": req.get("title", ""),
            "lyrics": req.get("lyrics", ""),
            "instrumental": not str(req.get("lyrics") or "").strip(),
            "style": style_text(req),
            "duration_s": req.get("duration"),
            "steps": req.get("steps"),
            "cfg": req.get("cfg"),
            # The source song is named by the parent take; its file path stays on the server.
            "edit": {"mode": edit.get("mode"), "segments": edit.get("segments")} if isinstance(edit, dict) else None,
            "model": effective.get("model"),
            "audio_seconds": (record.get("audio") or {}).get("seconds"),
            "sung_lines": sum(1 for r in report if isinstance(r, dict) and r.get("status") == "sung"),
            "style_match": (record.get("style_match") or {}).get("cosine"),
            "lyrics_checked": isinstance(record.get("lyrics_check"), dict) and "lines" in record["lyrics_check"],
            "notes": list(record.get("notes") or []),
        },
    }
    return access.public(out)
