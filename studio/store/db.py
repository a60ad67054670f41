"""Database plumbing: the engine (SQLite in WAL mode, or a server database such as PostgreSQL) and the
Alembic migrations run at startup, the same on both.

SQLite is the default: one file in the data folder, nothing to install. `postgresql+psycopg://...`
(`pip install -e ".[postgres]"`) lets several studio processes on several hosts share one database.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, func, make_url, select, text
from sqlalchemy.engine import URL
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import QueuePool

from .tables import utcnow

logger = logging.getLogger(__name__)

ALEMBIC_DIR = Path(__file__).with_name("alembic")

# pg_advisory_xact_lock key: studio processes starting together migrate one after the other.
_MIGRATION_LOCK = 0x5354_5544_494F  # "STUDIO"


class Database:
    """One open database: its engine and short transactions, shared by the store's parts (takes and
    sessions, leases, sharing, integrity), which each hold this object instead of each other.

    Every `tx()` / `read()` is its own short transaction (SQLite WAL or PostgreSQL MVCC: readers never
    wait on a writer), safe from any thread.
    """

    def __init__(self, engine: Engine, data_dir: Path) -> None:
        self.engine = engine
        self.data_dir = data_dir
        self.sqlite = is_sqlite(engine)
        self._session = sessionmaker(engine, expire_on_commit=False)
        # SQLite has one writer: writers inside this process queue here rather than on the file's lock.
        # A server database takes concurrent writers (row locks where it matters).
        self._lock: Any = threading.Lock() if self.sqlite else contextlib.nullcontext()

    @contextmanager
    def tx(self) -> Iterator[Session]:
        """A write transaction, committed on leaving the block."""
        with self._lock, self._session() as s, s.begin():
            yield s

    @contextmanager
    def read(self) -> Iterator[Session]:
        with self._session() as s:
            yield s

    def now(self, s: Session) -> datetime:
        """"Now" by the database's clock (see `now_expr`)."""
        return db_now(s, self.engine)


def make_engine(db: Path | str | URL) -> Engine:
    """An engine for a SQLite file (a path or a sqlite URL) or a server database URL."""
    if isinstance(db, Path):
        return _sqlite_engine(f"sqlite:///{db}")
    url = make_url(db)
    if url.get_backend_name() == "sqlite":
        return _sqlite_engine(url)
    if url.drivername == "postgresql":  # SQLAlchemy's default driver is psycopg2; the studio's is psycopg 3
        url = url.set(drivername="postgresql+psycopg")
    if url.get_backend_name() == "postgresql" and url.get_driver_name() in ("psycopg2", "pg8000", "asyncpg"):
        logger.info("[store] %s is untested; the studio is tested with postgresql+psycopg", url.drivername)
    try:
        return create_engine(url, pool_size=5, max_overflow=10, pool_pre_ping=True)
    except ModuleNotFoundError as exc:
        raise RuntimeError(
            f"the database driver for {url.drivername} is not installed ({exc.name}); for PostgreSQL: "
            'pip install -e ".[postgres]" (psycopg)'
        ) from exc


def _sqlite_engine(url: str | URL) -> Engine:
    """A SQLite engine whose every connection runs in WAL mode with foreign keys on.

    WAL lets the UI threads read while the take runner writes progress; busy_timeout makes a second
    writer (e.g. `studio render --session` in another process) wait instead of failing at once.
    """
    engine = create_engine(
        url,
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


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"


def describe(engine: Engine) -> str:
    """The database for logs and manifests: the file, or the URL without its password."""
    if is_sqlite(engine):
        return str(engine.url.database)
    return engine.url.render_as_string(hide_password=True)


def now_expr(engine: Engine):  # -> a SQL expression or a value
    """"Now" in naive UTC by the database's clock where there is a server (hosts' clocks may differ;
    leases are compared on one clock), by this process's clock for SQLite (one host)."""
    if engine.dialect.name == "postgresql":
        return func.timezone("UTC", func.now())
    return utcnow()


def db_now(conn_or_session, engine: Engine) -> datetime:
    expr = now_expr(engine)
    return expr if isinstance(expr, datetime) else conn_or_session.scalar(select(expr))


def alembic_config(engine: Engine):  # -> alembic.config.Config (imported lazily: alembic is slow-ish)
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(ALEMBIC_DIR))
    # configparser interpolation: a URL-encoded password's "%" must be doubled.
    cfg.set_main_option("sqlalchemy.url", engine.url.render_as_string(hide_password=False).replace("%", "%%"))
    cfg.attributes["engine"] = engine
    return cfg


def migrate(engine: Engine, revision: str = "head") -> None:
    """Bring the database to `revision` (creating it on first use).

    On PostgreSQL the migration holds a transaction-level advisory lock: several studio processes
    starting at once on an empty database migrate one after the other (DDL is transactional there, so
    the second finds the schema at head and does nothing).
    """
    from alembic import command

    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATION_LOCK})
        cfg = alembic_config(engine)
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
    logger.info("[store] migrated db=%s to %s", describe(engine), revision)


def current_revision(engine: Engine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def head_revision() -> str:
    from alembic.script import ScriptDirectory

    return ScriptDirectory(str(ALEMBIC_DIR)).get_current_head() or ""
