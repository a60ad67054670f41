"""What a take's files are called when a musician downloads them (the page's links, the API's file URLs).

A download is named for what the musician knows, never for the server's file name or the take's id:
the take's own name once renamed, else the song's title; the take's number in its session (counted
over every take the session ever had, deleted ones included, so a number never moves); and for an edit
or an extension, which take it was made from. So the variations, edits and extensions of one take get
distinct names ("Night-Drive-take3-edit-of-take1.wav"), and a rename renames the next download.
The page's link (its `download` attribute) and the file route's Content-Disposition use the same name.
"""

from __future__ import annotations

import re

from engine.outputs import made_word
from studio.store import UNTITLED, Store, TakeInfo

_UNSAFE = re.compile(r"[^\w]+")  # \w keeps letters of every script: a Chinese title stays readable
LIMIT = 60


def _clean(text: str) -> str:
    return _UNSAFE.sub("-", text or "").strip("-_")[:LIMIT].strip("-_")


def take_numbers(store: Store, session_id: str) -> dict[str, int]:
    """Take id -> its number in the session (1 = the first take ever asked for in it)."""
    takes = store.list_takes(session_id, include_deleted=True)
    return {t.id: i for i, t in enumerate(takes, 1)}


def download_stem(store: Store, take: TakeInfo, numbers: dict[str, int] | None = None) -> str:
    """The file name without extension (see the module's note); `numbers` from `take_numbers` if known."""
    numbers = numbers if numbers is not None else take_numbers(store, take.session_id)
    number = f"take{numbers[take.id]}" if take.id in numbers else "take"
    if take.name and _clean(take.name):
        return f"{_clean(take.name)}-{number}"  # the musician's own name says what it is
    title = _clean(str(take.request.get("title") or ""))
    if not title:
        session = store.get_session(take.session_id)
        # The session's title is its first sung line or its style when none was typed; "song" beats
        # "Untitled-session".
        title = _clean(session.title) if session is not None and session.title != UNTITLED else ""
    stem = f"{title or 'song'}-{number}"
    made = made_word(take.request)
    if made:
        source = numbers.get(take.parent_id or "")
        stem += f"-{made}-of-take{source}" if source else f"-{made}"
    return stem


def download_name(store: Store, take: TakeInfo, kind: str, numbers: dict[str, int] | None = None) -> str:
    """The name the browser saves file `kind` of `take` under (wav, flac, mp3, json record)."""
    path = take.files.get(kind) or ""
    suffix = path.rsplit(".", 1)[-1] if "." in path.rsplit("/", 1)[-1] else kind
    return f"{download_stem(store, take, numbers)}.{suffix}"
