"""Database plumbing: a SQLite engine in WAL mode and Alembic migrations run at startup."""

from __future__ import annotations

import logging
from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.pool import QueuePool

log = logging.getLogger(__name__)

ALEMBIC_DIR = Path(__file__).with_name("alembic")


def make_engine(db_path: Path) -> Engine:
    """A SQLite engine whose every connection runs in WAL mode with foreign keys on.

    WAL lets the UI threads read while the take runner writes progress; busy_timeout makes a second
    writer (e.g. `studio render --session` in another process) wait instead of failing at once.
    """
    engine = create_engine(
        f"sqlite:///{db_path}",
        poolclass=QueuePool,
        pool_size=5,
        max_overflow=10,
        # Gradio calls handlers from worker threads; each Store call checks a connection out and back.
        connect_args={"check_same_thread": False, "timeout": 30},
    )

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_conn, _record) -> None:  # type: ignore[no-untyped-def]
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    return engine


def alembic_config(engine: Engine):  # -> alembic.config.Config (imported lazily: alembic is slow-ish)
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(ALEMBIC_DIR))
    cfg.set_main_option("sqlalchemy.url", engine.url.render_as_string(hide_password=False))
    cfg.attributes["engine"] = engine
    return cfg


def migrate(engine: Engine, revision: str = "head") -> None:
    """Bring the database to `revision` (creating it on first use)."""
    from alembic import command

    with engine.begin() as conn:
        cfg = alembic_config(engine)
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
    log.info("[store] migrated db=%s to %s", engine.url.database, revision)


def current_revision(engine: Engine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()
