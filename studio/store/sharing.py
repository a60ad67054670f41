"""Share links and session copies: the read-only `/?s=<token>` links and "Copy to my sessions"."""

from __future__ import annotations

from sqlalchemy import select

from .db import Database
from .rows import StoreError, denormalise, get_row, session_row, take_count
from .tables import ACTIVE_STATUSES, SessionRow, ShareLinkRow, TakeRow, utcnow
from .views import SessionInfo, ShareInfo


class Sharing:
    """Share links and session copies on one database (`Store` composes one and forwards its calls)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def share(self, session_id: str) -> ShareInfo:
        """The session's live link (created on first use; a revoked link is never reused)."""
        with self.db.tx() as s:
            session_row(s, session_id)
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
        with self.db.tx() as s:
            row = get_row(s, ShareLinkRow, token)
            if row is None:
                raise StoreError("no such share link")
            row.revoked_at = row.revoked_at or utcnow()
        return ShareInfo.of(row)

    def share_links(self, session_id: str) -> list[ShareInfo]:
        with self.db.read() as s:
            stmt = select(ShareLinkRow).where(ShareLinkRow.session_id == session_id)
            return [ShareInfo.of(r) for r in s.scalars(stmt.order_by(ShareLinkRow.created_at))]

    def resolve_share(self, token: str) -> SessionInfo | None:
        """The shared session, or None when the token is unknown or revoked."""
        if not token or len(token) > 64:
            return None
        with self.db.read() as s:
            link = get_row(s, ShareLinkRow, token)
            if link is None or link.revoked_at is not None:
                return None
            row = s.get(SessionRow, link.session_id)
            return SessionInfo.of(row, take_count(s, row.id)) if row else None

    def copy_session(self, session_id: str, *, owner: str | None = None) -> SessionInfo:
        """A new session owned by `owner` with the same inputs and copies of the finished takes.

        Audio files are shared (takes are only soft-deleted, so a file is never removed under a copy).
        """
        with self.db.tx() as s:
            src = session_row(s, session_id)
            copy = SessionRow(
                title=f"{src.title} (copy)", owner=owner, inputs=dict(src.inputs), copied_from=src.id
            )
            denormalise(copy, copy.inputs)
            s.add(copy)
            s.flush()
            # Rows come in no guaranteed order (PostgreSQL keeps updated rows last in its heap): copy them all, then
            # re-point the lineage inside the copy.
            pairs: list[tuple[TakeRow, TakeRow]] = []
            for take in sorted(src.takes, key=lambda t: (t.created_at, t.id)):
                if take.deleted_at is not None or take.status in ACTIVE_STATUSES:
                    continue
                new = TakeRow(session_id=copy.id, runner=None)
                for col in ("request", "status", "progress", "phase", "error", "files", "seed", "variation",
                            "timings", "models", "record", "name", "starred", "created_at"):
                    setattr(new, col, getattr(take, col))
                s.add(new)
                pairs.append((take, new))
            s.flush()
            id_map = {take.id: new.id for take, new in pairs}
            for take, new in pairs:
                new.parent_id = id_map.get(take.parent_id or "")
        return SessionInfo.of(copy, len(id_map))

