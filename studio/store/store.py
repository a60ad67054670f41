"""`Store`: the studio's store (SQLite in the data folder, or PostgreSQL shared by several studio
processes), and the small Python API the batch renderer uses too.

    store = Store("data/studio.db")            # or Store("data/") -> data/studio.db
    store = Store("data/", db_url="postgresql://studio@db/studio")   # one database, several hosts
    s = store.create_session("Night drive", inputs={"lyrics": ..., "style": ...})
    t = store.add_take(s.id, request_dict)
    store.update_take(t.id, status="running", progress=0.4, phase="step 13/32")
    store.update_take(t.id, status="done", files={"wav": "takes/x.wav"}, seed=42, timings={...})
    token = store.share(s.id).token; store.resolve_share(token); store.revoke(token)

Every call is its own short transaction (SQLite WAL or PostgreSQL MVCC: readers never wait on a
writer), safe from any thread and from several processes.

Several processes, one database (PostgreSQL): see `leases` for how a process that is gone is told
apart from a live one on another host. Once recovery has interrupted a take, the late writes of its old
runner (status, progress, files) are dropped: a process that was only slow cannot bring back a take the
studio already offers to retry.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from sqlalchemy import Text, func, or_, select
from sqlalchemy.engine import URL

from . import db, integrity
from .db import Database
from .leases import HEARTBEAT_S, LEASE_S, Leases
from .rows import StoreError, denormalise, get_row, session_row, take_count, take_row
from .runner_id import this_runner
from .sharing import Sharing
from .tables import (
    ACTIVE_STATUSES,
    INTERRUPTED,
    QUEUED,
    UNTITLED,
    SessionRow,
    StyleRow,
    TakeRow,
    clean_text,
    utcnow,
)
from .views import SessionInfo, ShareInfo, StyleInfo, TakeInfo, relative_to_data

logger = logging.getLogger(__name__)

DB_NAME = "studio.db"
# Columns update_take may set; anything else is a programming error, named in the exception.
TAKE_FIELDS = frozenset(
    {"status", "progress", "phase", "error", "files", "seed", "timings", "models", "record", "name",
     "starred", "request", "runner"}
)
# What the process driving a take writes; a take that recovery interrupted keeps these as they are.
RUNNER_FIELDS = frozenset({"status", "progress", "phase", "error", "files", "seed", "timings", "models",
                           "record", "runner"})


class Store:
    """Sessions, takes, saved styles and share links in one database (migrated on open).

    Composed of parts that share one `Database` and not each other: `Leases` (heartbeats, recovery),
    `Sharing` (share links, copies), `integrity.check`.

    `path`: the data folder (or its `studio.db`); the database is that file unless `db_url` names
    another one (`studio serve/render --db`, default `$STUDIO_DB_URL`). Files are always kept relative
    to the data folder, which all processes sharing one database must share too (mounted at any path).
    `leases`: heartbeat rows and lease-based recovery; default on for server databases, off for SQLite
    (one host: the pid check is enough).
    """

    def __init__(self, path: str | Path, *, db_url: str | URL | None = None, leases: bool | None = None,
                 lease_s: float = LEASE_S, heartbeat_s: float = HEARTBEAT_S) -> None:
        path = Path(path)
        if path.suffix == ".db":
            data_dir = path.parent
        else:  # a data directory
            data_dir, path = path, path / DB_NAME
        data_dir.mkdir(parents=True, exist_ok=True)
        engine = db.make_engine(path if db_url is None else db_url)
        if not db.is_sqlite(engine):
            path = None
        elif db_url is not None:
            path = Path(engine.url.database or path)
        self.path: Path | None = path  # the SQLite file; None on a server database
        self.db = Database(engine, data_dir)
        self.engine, self.data_dir, self.sqlite = engine, data_dir, self.db.sqlite
        self.leases = (not self.sqlite) if leases is None else bool(leases)
        self._leases = Leases(self.db, enabled=self.leases, lease_s=lease_s, heartbeat_s=heartbeat_s,
                              on_beat=self.recover_interrupted)
        self.sharing = Sharing(self.db)
        db.migrate(engine)
        self._dropped: set[str] = set()  # takes whose late writes were dropped (warned about once)

    @property
    def database(self) -> str:
        """Which database: the SQLite file, or the URL without its password."""
        return db.describe(self.engine)

    @property
    def url(self) -> URL:
        """The engine's URL (password included: never log it; `database` is for showing)."""
        return self.engine.url

    def close(self) -> None:
        self._leases.close()
        self.engine.dispose()

    # ---------------------------------------------------------------- sessions
    def create_session(
        self, title: str = "", *, owner: str | None = None, inputs: dict[str, Any] | None = None
    ) -> SessionInfo:
        inputs = dict(inputs or {})
        row = SessionRow(title=title.strip() or _title_from(inputs), owner=owner, inputs=inputs)
        denormalise(row, inputs)
        with self.db.tx() as s:
            s.add(row)
        return SessionInfo.of(row)

    def get_session(self, session_id: str) -> SessionInfo | None:
        with self.db.read() as s:
            row = get_row(s, SessionRow, session_id)
            return SessionInfo.of(row, take_count(s, row.id)) if row else None

    def update_session(
        self, session_id: str, *, title: str | None = None, inputs: dict[str, Any] | None = None
    ) -> SessionInfo:
        with self.db.tx() as s:
            row = session_row(s, session_id)
            if title is not None:
                row.title = title.strip() or row.title
            if inputs is not None:
                row.inputs = dict(inputs)
                denormalise(row, row.inputs)
            row.updated_at = utcnow()
        return SessionInfo.of(row)

    def adopt_ownerless(self, owner: str) -> int:
        """Give sessions without an owner (made before owners were enforced) to `owner`; returns how many."""
        with self.db.tx() as s:
            rows = s.scalars(select(SessionRow).where(SessionRow.owner.is_(None))).all()
            for row in rows:
                row.owner = owner
        return len(rows)

    def list_sessions(self, owner: str | None = None, *, limit: int = 100) -> list[SessionInfo]:
        """Newest first. With `owner`: that owner's sessions only. Without: all (operators, migrations);
        callers serving a client always pass the owner the server verified."""
        return self._sessions(None, owner, limit)

    def search(self, query: str, owner: str | None = None, *, limit: int = 100) -> list[SessionInfo]:
        """Sessions whose title, lyrics or style (or any take's lyrics/style) contain `query`."""
        return self._sessions(clean_text(query).strip(), owner, limit)

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
        with self.db.read() as s:
            rows = s.scalars(stmt).all()
            counts = dict(
                s.execute(
                    select(TakeRow.session_id, func.count())
                    .where(TakeRow.session_id.in_([r.id for r in rows]), TakeRow.deleted_at.is_(None))
                    .group_by(TakeRow.session_id)
                ).all()
            )
            return [SessionInfo.of(r, counts.get(r.id, 0)) for r in rows]

    def count_active_takes(self, owner: str) -> int:
        """How many of `owner`'s takes are queued or rendering (per-owner admission)."""
        stmt = (select(func.count()).select_from(TakeRow).join(SessionRow, TakeRow.session_id == SessionRow.id)
                .where(SessionRow.owner == owner, TakeRow.status.in_(ACTIVE_STATUSES)))
        with self.db.read() as s:
            return int(s.execute(stmt).scalar() or 0)

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
        runner = runner if runner is not None else this_runner()
        if runner == this_runner():
            # The lease first: a take is never in the database under a runner that holds no lease (a
            # process dying in between would leave it to nobody, see `leases`).
            self._leases.hold()
        with self.db.tx() as s:
            session = session_row(s, session_id)
            if parent_id is not None and get_row(s, TakeRow, parent_id) is None:
                raise StoreError(f"parent take {parent_id!r} does not exist")
            row = TakeRow(
                session_id=session_id,
                request=dict(request),
                parent_id=parent_id,
                variation=variation,
                seed=seed,
                status=status,
                runner=runner,
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
        with self.db.tx() as s:
            # The row lock orders this write against a recovery of the same take in another process.
            row = take_row(s, take_id, lock=True)
            if row.status == INTERRUPTED and RUNNER_FIELDS & set(fields):
                dropped = sorted(RUNNER_FIELDS & set(fields))
                level = logging.DEBUG if take_id in self._dropped else logging.WARNING  # once a take
                self._dropped.add(take_id)
                logger.log(level, "[store] take=%s is interrupted (runner=%s); dropped late write of %s",
                        take_id, row.runner, ", ".join(dropped))
                fields = {k: v for k, v in fields.items() if k not in RUNNER_FIELDS}
                if not fields:
                    return TakeInfo.of(row, self.data_dir)
            for key, value in fields.items():
                setattr(row, key, value)
            row.updated_at = utcnow()
        return TakeInfo.of(row, self.data_dir)

    def get_take(self, take_id: str) -> TakeInfo | None:
        with self.db.read() as s:
            row = get_row(s, TakeRow, take_id)
            return TakeInfo.of(row, self.data_dir) if row else None

    def list_takes(self, session_id: str, *, include_deleted: bool = False) -> list[TakeInfo]:
        stmt = select(TakeRow).where(TakeRow.session_id == session_id).order_by(TakeRow.created_at, TakeRow.id)
        if not include_deleted:
            stmt = stmt.where(TakeRow.deleted_at.is_(None))
        with self.db.read() as s:
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
        with self.db.tx() as s:
            row = take_row(s, take_id)
            row.deleted_at = when
            row.updated_at = utcnow()
        return TakeInfo.of(row, self.data_dir)

    def recover_interrupted(self) -> list[TakeInfo]:
        """Takes left queued/running by a process that is gone become "interrupted" (retryable).

        Called by `studio serve` and `studio render --session` at startup (and, with leases, on every
        heartbeat); takes driven by a live process (another studio, a running `studio render`, a studio
        on another host whose lease runs) are left alone. See `leases` for how "gone" is judged.
        """
        self._leases.hold()
        dead = self._leases.recover()
        if dead:
            logger.info("[store] recovered interrupted=%d runners=%s", len(dead),
                     ",".join(sorted({r.runner or "?" for r in dead})))
        return [TakeInfo.of(r, self.data_dir) for r in dead]

    def heartbeat(self) -> None:
        """Renew this process's lease now (the lease thread does it every `heartbeat_s`)."""
        self._leases.heartbeat()

    def check_integrity(self) -> list[str]:
        """What is wrong with the database; empty when nothing is (see `integrity.check`)."""
        return integrity.check(self.db, self._leases)

    # ---------------------------------------------------------------- share links (see `sharing`)
    def share(self, session_id: str) -> ShareInfo:
        return self.sharing.share(session_id)

    def revoke(self, token: str) -> ShareInfo:
        return self.sharing.revoke(token)

    def share_links(self, session_id: str) -> list[ShareInfo]:
        return self.sharing.share_links(session_id)

    def resolve_share(self, token: str) -> SessionInfo | None:
        return self.sharing.resolve_share(token)

    def copy_session(self, session_id: str, *, owner: str | None = None) -> SessionInfo:
        return self.sharing.copy_session(session_id, owner=owner)

    def uses_upload(self, name: str) -> bool:
        """Whether a session's inputs or a take's request names the upload `name` (`studio.uploads`)."""
        pattern = f"%{name}%"  # a wildcard in a name only matches more: the file is kept, never lost
        with self.db.read() as s:
            for column in (SessionRow.inputs, TakeRow.request):
                if s.execute(select(column).where(func.cast(column, Text()).like(pattern)).limit(1)).first():
                    return True
        return False

    # ---------------------------------------------------------------- saved styles
    # A style belongs to the owner who saved it (names unique per owner); `owner=None` are the shared
    # styles (saved before styles had owners, or by the operator): every owner may use them, none
    # overwrites them. An owner's own style of the same name comes first.
    def save_style(self, name: str, *, owner: str | None = None, prompt: str = "",
                   embedding_path: str | Path | None = None, source: str = "text") -> StyleInfo:
        name = name.strip()
        if not name:
            raise StoreError("a saved style needs a name")
        if len(name) > 200 or "\x00" in name:
            raise StoreError("a saved style's name is at most 200 characters, with no NUL")
        emb = relative_to_data(embedding_path, self.data_dir) if embedding_path else None
        with self.db.tx() as s:
            row = s.scalars(select(StyleRow).where(StyleRow.name == name, _owned_by(owner))).first()
            row = row or StyleRow(name=name, owner=owner)
            row.prompt, row.embedding_path, row.source = prompt, emb, source
            s.add(row)
        return StyleInfo.of(row, self.data_dir)

    def list_styles(self, owner: str | None = None) -> list[StyleInfo]:
        """`owner`'s styles and the shared ones, by name (an owner's own hides a shared one of its name)."""
        with self.db.read() as s:
            rows = s.scalars(select(StyleRow).where(or_(_owned_by(owner), _owned_by(None)))
                             .order_by(StyleRow.name, StyleRow.owner.is_(None))).all()
            first: dict[str, StyleRow] = {}
            for r in rows:  # the owner's own first within each name
                first.setdefault(r.name, r)
            return [StyleInfo.of(r, self.data_dir) for r in first.values()]

    def get_style(self, name: str, owner: str | None = None) -> StyleInfo | None:
        if "\x00" in name:
            return None
        with self.db.read() as s:
            rows = s.scalars(select(StyleRow).where(StyleRow.name == name, or_(_owned_by(owner), _owned_by(None)))
                             .order_by(StyleRow.owner.is_(None))).all()
            return StyleInfo.of(rows[0], self.data_dir) if rows else None

    def delete_style(self, name: str, owner: str | None = None) -> None:
        if "\x00" in name:
            return
        with self.db.tx() as s:
            row = s.scalars(select(StyleRow).where(StyleRow.name == name, _owned_by(owner))).first()
            if row is not None:
                s.delete(row)


def _owned_by(owner: str | None) -> Any:
    return StyleRow.owner.is_(None) if owner is None else StyleRow.owner == owner


def _title_from(inputs: dict[str, Any]) -> str:
    """A readable default title: the first sung line, else the style, else "Untitled session"."""
    for line in str(inputs.get("lyrics") or "").splitlines():
        text = re.sub(r"\[[^\]]*\]", "", line).strip()
        if text:
            return text[:60]
    style = str(inputs.get("style") or inputs.get("style_text") or "").strip()
    return style[:60] or UNTITLED


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")

