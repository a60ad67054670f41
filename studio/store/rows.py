"""Row lookups shared by the store's modules, and the error they raise."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from .tables import SessionRow, TakeRow


class StoreError(ValueError):
    """A store call referred to something that does not exist or is not allowed."""


def get_row(s: Session, model: Any, key: Any, **kw: Any) -> Any:
    """`Session.get`, with None for a key no row can have (PostgreSQL refuses NUL in text; SQLite would
    just find nothing)."""
    if not isinstance(key, str) or "\x00" in key:
        return None
    return s.get(model, key, **kw)


def session_row(s: Session, session_id: str) -> SessionRow:
    row = get_row(s, SessionRow, session_id)
    if row is None:
        raise StoreError(f"no session {session_id!r}")
    return row


def take_row(s: Session, take_id: str, *, lock: bool = False) -> TakeRow:
    """The take; `lock`: `FOR UPDATE`, ordering this write against another process's recovery of it."""
    row = get_row(s, TakeRow, take_id, with_for_update=lock or None)
    if row is None:
        raise StoreError(f"no take {take_id!r}")
    return row


def take_count(s: Session, session_id: str) -> int:
    stmt = select(func.count()).where(TakeRow.session_id == session_id, TakeRow.deleted_at.is_(None))
    return int(s.scalar(stmt) or 0)


def denormalise(row: SessionRow, inputs: dict[str, Any]) -> None:
    """The session's lyrics and style columns (what history search reads) from its form inputs."""
    row.lyrics = str(inputs.get("lyrics") or "")
    style = inputs.get("style")
    row.style = style if isinstance(style, str) else str(inputs.get("style_text") or "")
