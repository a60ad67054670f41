"""Tidying a session's take list: every cancelled take deleted at once (the walk saw ten cancelled rows
after one Cancel of ten variations, each to be deleted by hand).

Deleting is the store's soft delete, as for one take; a selected take that goes is unselected (a deleted
id must not stay the list's value: the next event would send it and be refused).
"""

from __future__ import annotations

from typing import Any

from studio.store import CANCELLED


def delete_cancelled(h: Any, take_id: str | None, session_id: str | None, owner: str | None) -> dict:
    """`h` is the page's Handlers; the session must be the verified owner's."""
    t = h.page.takes
    own = h._own_id(session_id, owner)
    if own is None:
        return {t.note: "Open one of your sessions first."}
    gone = [x for x in h.svc.store.list_takes(own) if x.status == CANCELLED]
    if not gone:
        return {t.note: "No cancelled takes in this session."}
    for take in gone:
        h.svc.store.delete_take(take.id)
    note = f"Deleted {len(gone)} cancelled take{'s' if len(gone) != 1 else ''}."
    if take_id in {x.id for x in gone}:
        return {**h._listing(own, clear=True), **h.take_detail(None, own), t.note: note}
    return {**h._listing(own, select=take_id if isinstance(take_id, str) and take_id else None), t.note: note}
