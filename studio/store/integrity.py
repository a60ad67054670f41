"""`Store.check_integrity`: what is wrong with a store's database (an empty list: nothing found)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, or_, select, text
from sqlalchemy.orm import aliased

from . import db
from .db import Database
from .leases import Leases
from .tables import ACTIVE_STATUSES, FINAL_STATUSES, SessionRow, ShareLinkRow, TakeRow

KNOWN_STATUSES = frozenset((*ACTIVE_STATUSES, *FINAL_STATUSES))
TABLES = ("sessions", "takes", "styles", "share_links", "runners", "alembic_version")


def check(database: Database, leases: Leases) -> list[str]:
    """The engine's own checks (SQLite's integrity_check and foreign_key_check; PostgreSQL's amcheck on
    the store's indexes where that extension is installed), the schema at head, and the store's
    invariants: no orphans, known statuses, progress within 0..1, no take queued or running for a
    process that is gone (recovery not run)."""
    problems: list[str] = []
    engine = database.engine
    with engine.connect() as conn:
        if database.sqlite:
            verdict = [r[0] for r in conn.exec_driver_sql("PRAGMA integrity_check")]
            if verdict != ["ok"]:
                problems += [f"sqlite integrity_check: {v}" for v in verdict]
            problems += [f"sqlite foreign_key_check: {tuple(r)}"
                         for r in conn.exec_driver_sql("PRAGMA foreign_key_check")]
        elif engine.dialect.name == "postgresql":
            problems += _pg_amcheck(conn)
    rev, head = db.current_revision(engine), db.head_revision()
    if rev != head:
        problems.append(f"schema at revision {rev}, head is {head}")
    parent = aliased(TakeRow)
    checks = {
        "takes without their session": select(func.count()).select_from(TakeRow).where(
            ~select(SessionRow.id).where(SessionRow.id == TakeRow.session_id).exists()),
        "takes whose parent is missing": select(func.count()).select_from(TakeRow).where(
            TakeRow.parent_id.is_not(None), ~select(parent.id).where(parent.id == TakeRow.parent_id).exists()),
        "share links without their session": select(func.count()).select_from(ShareLinkRow).where(
            ~select(SessionRow.id).where(SessionRow.id == ShareLinkRow.session_id).exists()),
        "takes with an unknown status": select(func.count()).select_from(TakeRow).where(
            TakeRow.status.not_in(KNOWN_STATUSES)),
        "takes with progress outside 0..1": select(func.count()).select_from(TakeRow).where(
            or_(TakeRow.progress < 0, TakeRow.progress > 1)),
    }
    with database.read() as s:
        for what, stmt in checks.items():
            n = int(s.scalar(stmt) or 0)
            if n:
                problems.append(f"{n} {what}")
        orphaned = leases.orphaned(s)
    if orphaned:
        problems.append(f"{len(orphaned)} take(s) queued/running for a process that is gone "
                        f"(recover_interrupted not run): {orphaned[:5]}")
    return problems


def _pg_amcheck(conn: Any) -> list[str]:
    """amcheck's bt_index_check on the store's B-tree indexes (only where the extension is installed: a
    check installs nothing)."""
    if not conn.execute(text("SELECT 1 FROM pg_extension WHERE extname = 'amcheck'")).first():
        return []
    rows = conn.execute(text(
        "SELECT c.oid, c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "JOIN pg_class t ON t.oid = i.indrelid JOIN pg_am a ON a.oid = c.relam "
        "WHERE a.amname = 'btree' AND t.relname = ANY(:tables) "
        "AND t.relnamespace = CAST(current_schema() AS regnamespace)"), {"tables": list(TABLES)}).all()
    problems = []
    for oid, name in rows:
        try:
            with conn.begin_nested():
                conn.execute(text("SELECT bt_index_check(CAST(CAST(:oid AS oid) AS regclass), true)"), {"oid": oid})
        except Exception as exc:  # noqa: BLE001 - reported, not raised
            problems.append(f"amcheck {name}: {str(exc).splitlines()[0]}")
    return problems
