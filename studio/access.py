"""Who may do what, decided once for every surface: page events, the HTTP API, files, the live stream,
share links (and the MCP server, which presents the same owner token in a header).

Callers turn what a request carries into a `Who` (a verified owner, a share token, or both) and ask the
functions here; none of them trusts an owner a client merely names. The rules:

- a session and all of its takes (deleted ones too, so Undo works) belong to the session's owner;
- a share token reads the finished, not deleted takes of the one session it opens, until revoked;
- an edit or continuation may start only from a finished, not deleted take of the caller's own;
- files go out only through `signed_file_url`: a URL signed for one take, one file kind, one grant
  (the owner, or one share link, by a fingerprint that does not reveal the token) and an expiry.
  `verify_file_url` re-applies the rules above at every request, so a URL stops working the moment
  its take is deleted, its link revoked or its session changes hands, even before it expires;
- nothing sent to a client names a server path (`public`).

Every refusal reads the same for "does not exist" and "not yours", so ids cannot be probed.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from studio.store import DONE, SessionInfo, Store, TakeInfo

FILE_PATH = "/studio/file/{take_id}/{kind}"
FILE_TTL_S = 6 * 3600  # a page left open for an evening keeps playing; a leaked URL dies within hours
_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_KIND = re.compile(r"^[a-z0-9]{1,16}$")
_KEY = re.compile(r"^(\d{1,12})\.(o|s[0-9a-f]{16})\.([0-9a-f]{32})$")


class AccessDenied(PermissionError):
    """Refused; the message is safe to show (it never says whether the thing exists)."""


@dataclass(frozen=True)
class Who:
    """A caller: `owner` is a verified owner id (never a client's claim), `share` a share token held."""

    owner: str | None = None
    share: str | None = None

    @classmethod
    def of(cls, identity: Any, *, token: Any = None, request: Any = None, share: Any = None) -> Who:
        """From an owner token (page state), or a request's `Authorization`/`X-Studio-Token` header."""
        owner = identity.owner_of(token) if token is not None else None
        if owner is None and request is not None:
            owner = identity.from_request(request)
        return cls(owner, share if isinstance(share, str) and share and len(share) <= 64 else None)


def own_session(store: Store, session_id: Any, who: Who) -> SessionInfo | None:
    """The session if `who` owns it; None for foreign, unknown or malformed ids alike."""
    if who.owner is None or not isinstance(session_id, str) or not _ID.match(session_id):
        return None
    s = store.get_session(session_id)
    return s if s is not None and s.owner == who.owner else None


def _take(store: Store, take_id: Any) -> TakeInfo | None:
    return store.get_take(take_id) if isinstance(take_id, str) and _ID.match(take_id) else None


def owns(store: Store, take: TakeInfo, who: Who) -> bool:
    return own_session(store, take.session_id, who) is not None


def shared_with(store: Store, take: TakeInfo, share: str | None) -> bool:
    """A finished, not deleted take of the session an unrevoked share token opens."""
    if not share or take.status != DONE or take.deleted:
        return False
    s = store.resolve_share(share)
    return s is not None and s.id == take.session_id


def can_read(store: Store, take: TakeInfo, who: Who) -> bool:
    return owns(store, take, who) or shared_with(store, take, who.share)


def readable_take(store: Store, take_id: Any, who: Who) -> TakeInfo | None:
    t = _take(store, take_id)
    return t if t is not None and can_read(store, t, who) else None


def own_take(store: Store, take_id: Any, who: Who) -> TakeInfo | None:
    t = _take(store, take_id)
    return t if t is not None and owns(store, t, who) else None


def edit_source(store: Store, take_id: Any, who: Who) -> TakeInfo:
    """The take an edit or continuation starts from: the caller's own, finished, not deleted, with a WAV.

    A share link does not grant it: editing copies the source's audio into a take the caller owns,
    which would outlive the link's revocation (copy the shared session first, then edit the copy).
    """
    t = own_take(store, take_id, who)
    if t is None or t.deleted or t.status != DONE or not t.file("wav"):
        raise AccessDenied("The source take is not a finished take of yours with a WAV file.")
    return t


# ---------------------------------------------------------------------- files

def _grant(who: Who, store: Store, take: TakeInfo) -> str | None:
    """What a file URL is bound to: "o" for the owner, "s<fingerprint>" for a share link."""
    if owns(store, take, who):
        return "o"
    if shared_with(store, take, who.share):
        return "s" + _fingerprint(who.share or "")
    return None


def _fingerprint(share: str) -> str:
    # Only a fingerprint travels in URLs: a file link handed on must not open the whole session.
    return hashlib.sha256(b"share-link:" + share.encode()).hexdigest()[:16]


def _signed_parts(take: TakeInfo, kind: str, grant: str, bound: str, expiry: str) -> tuple[str, ...]:
    # `bound` is the session's owner: a URL signed before the session changed hands is worth nothing.
    return (take.id, kind, grant, bound, expiry)


def file_kinds(take: TakeInfo) -> list[str]:
    """The file kinds a take has on disk (wav, flac, mp3, json record, ...)."""
    return [k for k, p in take.files.items() if _KIND.match(k) and Path(p).is_file()]


def signed_file_url(store: Store, identity: Any, take: TakeInfo, kind: str, who: Who,
                    now: float | None = None) -> str | None:
    """A URL for one file of `take`, usable only while `who` may still read it; None if it may not now."""
    grant = _grant(who, store, take)
    session = store.get_session(take.session_id)
    if grant is None or session is None or kind not in take.files or not _KIND.match(kind):
        return None
    expiry = str(int((now if now is not None else time.time()) + FILE_TTL_S))
    mac = identity.sign("file", *_signed_parts(take, kind, grant, session.owner or "", expiry))
    return f"/studio/file/{take.id}/{kind}?k={expiry}.{grant}.{mac}"


def file_urls(store: Store, identity: Any, take: TakeInfo, who: Who) -> dict[str, str]:
    out = {}
    for kind in file_kinds(take):
        url = signed_file_url(store, identity, take, kind, who)
        if url:
            out[kind] = url
    return out


def verify_file_url(store: Store, identity: Any, take_id: str, kind: str, key: str,
                    now: float | None = None) -> Path | None:
    """The file a signed URL names, if its signature holds, it has not expired and its grant still does."""
    m = _KEY.match(key or "")
    if m is None or not _ID.match(take_id or "") or not _KIND.match(kind or ""):
        return None
    expiry, grant, mac = m.groups()
    if int(expiry) < (now if now is not None else time.time()):
        return None
    take = store.get_take(take_id)
    session = store.get_session(take.session_id) if take is not None else None
    if take is None or session is None or kind not in take.files:
        return None
    if not identity.verify(mac, "file", *_signed_parts(take, kind, grant, session.owner or "", expiry)):
        return None
    if take.deleted:
        return None  # the owner's Undo brings it back, and new URLs with it
    if grant != "o":
        if take.status != DONE:
            return None
        links = [x for x in store.share_links(session.id) if not x.revoked]
        if not any(_fingerprint(x.token) == grant[1:] for x in links):
            return None
    path = Path(take.files[kind])
    return path if path.is_file() else None


# ---------------------------------------------------------------------- a session's style reference

REFERENCE_PATH = "/studio/reference/{session_id}"
_REF_KEY = re.compile(r"^(\d{1,12})\.([0-9a-f]{32})$")


def session_reference(session: SessionInfo, inside: Callable[[str], Path]) -> Path | None:
    """The uploaded reference song a session's style uses, if it is a file inside the data folder
    (`inside`: the config's check, raising for anything outside)."""
    inputs = session.inputs or {}
    name = inputs.get("style_audio")
    if inputs.get("style_source") != "audio" or not isinstance(name, str) or not name:
        return None
    try:
        path = inside(name)
    except (ValueError, OSError):
        return None
    return path if path.is_file() else None


def signed_reference_url(identity: Any, session: SessionInfo, reference: Path, who: Who,
                         now: float | None = None) -> str | None:
    """A URL for the session's reference song, for its owner only (the player of a reopened session)."""
    if who.owner is None or session.owner != who.owner:
        return None
    expiry = str(int((now if now is not None else time.time()) + FILE_TTL_S))
    mac = identity.sign("reference", session.id, session.owner, reference.name, expiry)
    return f"/studio/reference/{session.id}?k={expiry}.{mac}"


def verify_reference_url(store: Store, identity: Any, inside: Callable[[str], Path], session_id: str, key: str,
                         now: float | None = None) -> Path | None:
    """The reference a signed URL names, while its session still has that owner and that reference."""
    m = _REF_KEY.match(key or "")
    if m is None or not _ID.match(session_id or ""):
        return None
    expiry, mac = m.groups()
    if int(expiry) < (now if now is not None else time.time()):
        return None
    session = store.get_session(session_id)
    reference = session_reference(session, inside) if session is not None else None
    if reference is None or session is None or not session.owner:
        return None
    ok = identity.verify(mac, "reference", session.id, session.owner, reference.name, expiry)
    return reference if ok else None


# ---------------------------------------------------------------------- responses

def public(value: Any) -> Any:
    """`value` with every server path reduced to its file name (API answers, records, errors)."""
    if isinstance(value, dict):
        return {k: public(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [public(v) for v in value]
    if isinstance(value, str) and _looks_like_path(value):
        return Path(value).name
    return value


def _looks_like_path(s: str) -> bool:
    # Absolute, one line, and its folder exists here: lyrics or prompts starting with "/" stay as they are.
    if not s or "\n" in s or len(s) > 4096:
        return False
    p = Path(s)
    try:
        return p.is_absolute() and len(p.parts) > 1 and p.parent.exists()
    except OSError:
        return False
