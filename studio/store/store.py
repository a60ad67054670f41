"""`Store`: the studio's SQLite store, and the small Python API the batch renderer uses too.

    store = Store("data/studio.db")            # or Store("data/") -> data/studio.db
    s = store.create_session("Night drive", inputs={"lyrics": ..., "style": ...})
    t = store.add_take(s.id, request_dict)
    store.update_take(t.id, status="running", progress=0.4, phase="step 13/32")
    store.update_take(t.id, status="done", files={"wav": "takes/x.wav"}, seed=42, timings={...})
    token = store.share(s.id).token; store.resolve_share(token); store.revoke(token)

Every call is its own short transaction (WAL: readers never wait on the writer), safe from any thread.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Text, func, or_, select
from sqlalchemy.orm import Session, sessionmaker

from . import db
from .models import (
    ACTIVE_STATUSES,
    INTERRUPTED,
    QUEUED,
    SessionRow,
    ShareLinkRow,
    StyleRow,
    TakeRow,
    utcnow,
)
from .runner_id import process_alive, this_runner
from .views import SessionInfo, ShareInfo, StyleInfo, TakeInfo, relative_to_data

log = logging.getLogger(__name__)

DB_NAME = "studio.db"
# Columns update_take may set; anything else is a programming error, named in the exception.
TAKE_FIELDS = frozenset(
    {"status", "progress", "phase", "error", "files", "seed", "timings", "models", "record", "name",
     "starred", "request", "runner"}
)


class StoreError(ValueError):
    """A store call referred to something that does not exist or is not allowed."""


class Store:
    """Sessions, takes, saved styles and share links in one SQLite file (migrated on open)."""

    def __init__(self, path: str | Path) -> None:
        path = Path(path)
        if path.suffix != ".db":  # a data directory
            path = path / DB_NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.data_dir = path.parent
        self.engine = db.make_engine(path)
        db.migrate(self.engine)
        self._session = sessionmaker(self.engine, expire_on_commit=False)
        self._lock = threading.Lock()  # serialises writers inside this process (SQLite has one writer)

    def close(self) -> None:
        self.engine.dispose()

    @contextmanager
    def _tx(self) -> Iterator[Session]:
        with self._lock, self._session() as s, s.begin():
            yield s

    @contextmanager
    def _read(self) -> Iterator[Session]:
        with self._session() as s:
            yield s

    # ---------------------------------------------------------------- sessions
    def create_session(
        self, title: str = "", *, owner: str | None = None, inputs: dict[str, Any] | None = None
    ) -> SessionInfo:
        inputs = dict(inputs or {})
        row = SessionRow(title=title.strip() or _title_from(inputs), owner=owner, inputs=inputs)
        _denormalise(row, inputs)
        with self._tx() as s:
            s.add(row)
        return SessionInfo.of(row)

    def get_session(self, session_id: str) -> SessionInfo | None:
        with self._read() as s:
            row = s.get(SessionRow, session_id)
            return SessionInfo.of(row, self._count(s, row.id)) if row else None

    def update_session(
        self, session_id: str, *, title: str | None = None, inputs: dict[str, Any] | None = None
    ) -> SessionInfo:
        with self._tx() as s:
            row = self._session_row(s, session_id)
            if title is not None:
                row.title = title.strip() or row.title
            if inputs is not None:
                row.inputs = dict(inputs)
                _denormalise(row, row.inputs)
            row.updated_at = utcnow()
        return SessionInfo.of(row)

    def adopt_ownerless(self, owner: str) -> int:
        """Give sessions without an owner (made before owners were enforced) to `owner`; returns how many."""
        with self._tx() as s:
            rows = s.scalars(select(SessionRow).where(SessionRow.owner.is_(None))).all()
            for row in rows:
                row.owner = owner
        return len(rows)

    def delete_session(self, session_id: str) -> None:
        with self._tx() as s:
            s.delete(self._session_row(s, session_id))

    def list_sessions(self, owner: str | None = None, *, limit: int = 100) -> list[SessionInfo]:
        """Newest first. With `owner`: that owner's sessions only. Without: all (operators, migrations);
        callers serving a client always pass the owner the server verified."""
        return self._sessions(None, owner, limit)

    def search(self, query: str, owner: str | None = None, *, limit: int = 100) -> list[SessionInfo]:
        """Sessions whose title, lyrics or style (or any take's lyrics/style) contain `query`."""
        return self._sessions(query.strip(), owner, limit)

    def _sessions(self, query: str | None, owner: str | None, limit: int) -> list[SessionInfo]:
        stmt = select(SessionRow).order_by(SessionRow.updated_at.desc()).limit(limit)
        if owner is not None:
            stmt = stmt.where(SessionRow.owner == owner)
        if query:
            like = f"%{_escape_like(query)}%"
            take_match = (
                select(TakeRow.id)
                .where(TakeRow.session_id == SessionRow.id, TakeRow.deleted_at.is_(None))
                .where(func.cast(TakeRow.request, Text()).ilike(like, escape="\\"))
            )
            stmt = stmt.where(
                or_(
                    SessionRow.title.ilike(like, escape="\\"),
                    SessionRow.lyrics.ilike(like, escape="\\"),
                    SessionRow.style.ilike(like, escape="\\"),
                    take_match.exists(),
                )
            )
        with self._read() as s:
            rows = s.scalars(stmt).all()
            counts = dict(
                s.execute(
                    select(TakeRow.session_id, func.count())
                    .where(TakeRow.session_id.in_([r.id for r in rows]), TakeRow.deleted_at.is_(None))
                    .group_by(TakeRow.session_id)
                ).all()
            )
            return [SessionInfo.of(r, counts.get(r.id, 0)) for r in rows]

    # ---------------------------------------------------------------- takes
    def add_take(
        self,
        session_id: str,
        request: dict[str, Any],
        *,
        parent_id: str | None = None,
        variation: int = 0,
        seed: int | None = None,
        status: str = QUEUED,
        runner: str | None = None,
    ) -> TakeInfo:
        with self._tx() as s:
            session = self._session_row(s, session_id)
            if parent_id is not None and s.get(TakeRow, parent_id) is None:
                raise StoreError(f"parent take {parent_id!r} does not exist")
            row = TakeRow(
                session_id=session_id,
                request=dict(request),
                parent_id=parent_id,
                variation=variation,
                seed=seed,
                status=status,
                runner=runner if runner is not None else this_runner(),
            )
            s.add(row)
            session.updated_at = utcnow()
        return TakeInfo.of(row, self.data_dir)

    def update_take(self, take_id: str, **fields: Any) -> TakeInfo:
        unknown = set(fields) - TAKE_FIELDS
        if unknown:
            raise StoreError(f"update_take: unknown field(s) {sorted(unknown)}; allowed: {sorted(TAKE_FIELDS)}")
        if "files" in fields and fields["files"] is not None:
            fields["files"] = {k: relative_to_data(v, self.data_dir) for k, v in fields["files"].items()}
        with self._tx() as s:
            row = self._take_row(s, take_id)
            for key, value in fields.items():
                setattr(row, key, value)
            row.updated_at = utcnow()
        return TakeInfo.of(row, self.data_dir)

    def get_take(self, take_id: str) -> TakeInfo | None:
        with self._read() as s:
            row = s.get(TakeRow, take_id)
            return TakeInfo.of(row, self.data_dir) if row else None

    def list_takes(self, session_id: str, *, include_deleted: bool = False) -> list[TakeInfo]:
        stmt = select(TakeRow).where(TakeRow.session_id == session_id).order_by(TakeRow.created_at)
        if not include_deleted:
            stmt = stmt.where(TakeRow.deleted_at.is_(None))
        with self._read() as s:
            return [TakeInfo.of(r, self.data_dir) for r in s.scalars(stmt)]

    def rename_take(self, take_id: str, name: str) -> TakeInfo:
        return self.update_take(take_id, name=name.strip()[:200])

    def star_take(self, take_id: str, starred: bool = True) -> TakeInfo:
        return self.update_take(take_id, starred=starred)

    def delete_take(self, take_id: str) -> TakeInfo:
        """Soft delete: hidden from lists until `undelete_take` (the UI's "Undo")."""
        return self._set_deleted(take_id, utcnow())

    def undelete_take(self, take_id: str) -> TakeInfo:
        return self._set_deleted(take_id, None)

    def _set_deleted(self, take_id: str, when: Any) -> TakeInfo:
        with self._tx() as s:
            row = self._take_row(s, take_id)
            row.deleted_at = when
            row.updated_at = utcnow()
        return TakeInfo.of(row, self.data_dir)

    def recover_interrupted(self) -> list[TakeInfo]:
        """Takes left queued/running by a process that is gone become "interrupted" (retryable).

        Called by `studio serve` at startup; takes driven by a live process (another studio, a running
        `studio render`) are left alone.
        """
        with self._tx() as s:
            rows = s.scalars(select(TakeRow).where(TakeRow.status.in_(ACTIVE_STATUSES))).all()
            dead = [r for r in rows if not process_alive(r.runner)]
            for row in dead:
                row.status = INTERRUPTED
                who = "studio render" if (row.request or {}).get("render_id") else "the studio"
                row.phase = f"interrupted while {row.phase or row.status}: {who} stopped"
                row.updated_at = utcnow()
        if dead:
            log.info("[store] recovered interrupted=%d", len(dead))
        return [TakeInfo.of(r, self.data_dir) for r in dead]

    # ---------------------------------------------------------------- share links
    def share(self, session_id: str) -> ShareInfo:
        """The session's live link (created on first use; a revoked link is never reused)."""
        with self._tx() as s:
            self._session_row(s, session_id)
            row = s.scalars(
                select(ShareLinkRow).where(
                    ShareLinkRow.session_id == session_id, ShareLinkRow.revoked_at.is_(None)
                )
            ).first()
            if row is None:
                row = ShareLinkRow(session_id=session_id)
                s.add(row)
        return ShareInfo.of(row)

    def revoke(self, token: str) -> ShareInfo:
        with self._tx() as s:
            row = s.get(ShareLinkRow, token)
            if row is None:
                raise StoreError("no such share link")
            row.revoked_at = row.revoked_at or utcnow()
        return ShareInfo.of(row)

    def share_links(self, session_id: str) -> list[ShareInfo]:
        with self._read() as s:
            stmt = select(ShareLinkRow).where(ShareLinkRow.session_id == session_id)
            return [ShareInfo.of(r) for r in s.scalars(stmt.order_by(ShareLinkRow.created_at))]

    def resolve_share(self, token: str) -> SessionInfo | None:
        """The shared session, or None when the token is unknown or revoked."""
        if not token or len(token) > 64:
            return None
        with self._read() as s:
            link = s.get(ShareLinkRow, token)
            if link is None or link.revoked_at is not None:
                return None
            row = s.get(SessionRow, link.session_id)
            return SessionInfo.of(row, self._count(s, row.id)) if row else None

    def copy_session(self, session_id: str, *, owner: str | None = None) -> SessionInfo:
        """A new session owned by `owner` with the same inputs and copies of the finished takes.

        Audio files are shared (takes are only soft-deleted, so a file is never removed under a copy).
        """
        with self._tx() as s:
            src = self._session_row(s, session_id)
            copy = SessionRow(
                title=f"{src.title} (copy)", owner=owner, inputs=dict(src.inputs), copied_from=src.id
            )
            _denormalise(copy, copy.inputs)
            s.add(copy)
            s.flush()
            id_map: dict[str, str] = {}
            for take in src.takes:
                if take.deleted_at is not None or take.status in ACTIVE_STATUSES:
                    continue
                new = TakeRow(session_id=copy.id, runner=None)
                for col in ("request", "status", "progress", "phase", "error", "files", "seed", "variation",
                            "timings", "models", "record", "name", "starred", "created_at"):
                    setattr(new, col, getattr(take, col))
                new.parent_id = id_map.get(take.parent_id or "")
                s.add(new)
                s.flush()
                id_map[take.id] = new.id
        return SessionInfo.of(copy, len(id_map))

    # ---------------------------------------------------------------- saved styles
    def save_style(
        self, name: str, *, prompt: str = "", embedding_path: str | Path | None = None, source: str = "text"
    ) -> StyleInfo:
        name = name.strip()
        if not name:
            raise StoreError("a saved style needs a name")
        emb = relative_to_data(embedding_path, self.data_dir) if embedding_path else None
        with self._tx() as s:
            row = s.scalars(select(StyleRow).where(StyleRow.name == name)).first() or StyleRow(name=name)
            row.prompt, row.embedding_path, row.source = prompt, emb, source
            s.add(row)
        return StyleInfo.of(row, self.data_dir)

    def list_styles(self) -> list[StyleInfo]:
        with self._read() as s:
            return [StyleInfo.of(r, self.data_dir) for r in s.scalars(select(StyleRow).order_by(StyleRow.name))]

    def get_style(self, name: str) -> StyleInfo | None:
        with self._read() as s:
            row = s.scalars(select(StyleRow).where(StyleRow.name == name)).first()
            return StyleInfo.of(row, self.data_dir) if row else None

    def delete_style(self, name: str) -> None:
        with self._tx() as s:
            row = s.scalars(select(StyleRow).where(StyleRow.name == name)).first()
            if row is not None:
                s.delete(row)

    # ---------------------------------------------------------------- helpers
    @staticmethod
    def _session_row(s: Session, session_id: str) -> SessionRow:
        row = s.get(SessionRow, session_id)
        if row is None:
            raise StoreError(f"no session {session_id!r}")
        return row

    @staticmethod
    def _take_row(s: Session, take_id: str) -> TakeRow:
        row = s.get(TakeRow, take_id)
        if row is None:
            raise StoreError(f"no take {take_id!r}")
        return row

    @staticmethod
    def _count(s: Session, session_id: str) -> int:
        stmt = select(func.count()).where(TakeRow.session_id == session_id, TakeRow.deleted_at.is_(None))
        return int(s.scalar(stmt) or 0)


def _denormalise(row: SessionRow, inputs: dict[str, Any]) -> None:
    row.lyrics = str(inputs.get("lyrics") or "")
    style = inputs.get("style")
    row.style = style if isinstance(style, str) else str(inputs.get("style_text") or "")


def _title_from(inputs: dict[str, Any]) -> str:
    """A readable default title: the first sung line, else the style, else "Untitled session"."""
    for line in str(inputs.get("lyrics") or "").splitlines():
        text = re.sub(r"\[[^\]]*\]", "", line).strip()
        if text:
            return text[:60]
    style = str(inputs.get("style") or inputs.get("style_text") or "").strip()
    return style[:60] or "Untitled session"


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")

