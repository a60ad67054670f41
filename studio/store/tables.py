"""SQLAlchemy 2.0-style typed models: sessions, takes, saved styles, share links.

The Alembic migrations in `alembic/versions/` must produce exactly this schema on SQLite and on
PostgreSQL (a test compares them on both); change a model only together with a new migration.

PostgreSQL enforces what SQLite ignores: string lengths and no NUL characters in text. Display text
(titles, phases, names) is cleaned and cut to its column here, so the store behaves the same on both.
"""

from __future__ import annotations

import secrets
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship, validates

# Take statuses. "interrupted" is what a take that was queued or running becomes when the studio
# process died under it (see Store.recover_interrupted); it keeps its request so it can be retried.
QUEUED, RUNNING, DONE, FAILED, CANCELLED, INTERRUPTED = (
    "queued",
    "running",
    "done",
    "failed",
    "cancelled",
    "interrupted",
)
ACTIVE_STATUSES = (QUEUED, RUNNING)
FINAL_STATUSES = (DONE, FAILED, CANCELLED, INTERRUPTED)


def utcnow() -> datetime:
    """Naive UTC: SQLite has no time zones, and naive values compare cleanly after a round trip."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


def new_token() -> str:
    """128 random bits, URL-safe (22 characters): session ids and share tokens cannot be guessed."""
    return secrets.token_urlsafe(16)


def new_take_id() -> str:
    # Takes are only reachable through their session, so 72 bits keep ids short without being guessable.
    return secrets.token_urlsafe(9)


def clean_text(value: Any, length: int | None = None) -> Any:
    """Text as both databases take it: NUL characters dropped (PostgreSQL refuses them), cut to `length`."""
    if not isinstance(value, str):
        return value
    value = value.replace("\x00", "")
    return value[:length] if length is not None else value


# Seeds go up to 2**32 - 1: a 64-bit column on PostgreSQL (its INTEGER is 32-bit); SQLite's INTEGER
# already holds 64 bits, so its schema (and every existing SQLite file) keeps INTEGER.
SEED_TYPE = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


UNTITLED = "Untitled session"  # a session's title when nothing it holds gives one (store._title_from)


class SessionRow(Base):
    """A musician's working session: the last form inputs and every take made in it."""

    __tablename__ = "sessions"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_token)
    title: Mapped[str] = mapped_column(String(200), default=UNTITLED)
    # The browser that created it (a random key kept in the browser's local storage); NULL for sessions
    # made by the command line (`studio render --session`), which every local browser may see.
    owner: Mapped[str | None] = mapped_column(String(64), index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow, index=True)
    # The compose form as last saved (lyrics, style, duration, advanced settings): reopening a session
    # restores it, so nothing lives only in browser memory.
    inputs: Mapped[dict[str, Any]] = mapped_column(default=dict)
    # Denormalised from `inputs` so history search is a plain LIKE over three columns.
    lyrics: Mapped[str] = mapped_column(Text, default="")
    style: Mapped[str] = mapped_column(Text, default="")
    # Set when this session was copied from a shared link (the source session's id).
    copied_from: Mapped[str | None] = mapped_column(String(32))

    takes: Mapped[list[TakeRow]] = relationship(
        back_populates="session", cascade="all, delete-orphan", order_by="TakeRow.created_at"
    )
    links: Mapped[list[ShareLinkRow]] = relationship(back_populates="session", cascade="all, delete-orphan")

    @validates("title")
    def _cut_title(self, _key: str, value: Any) -> Any:
        return clean_text(value, 200)

    @validates("lyrics", "style")
    def _clean(self, _key: str, value: Any) -> Any:
        return clean_text(value)


class TakeRow(Base):
    """One rendered (or attempted) song: its request, live status, result files and full record."""

    __tablename__ = "takes"
    __table_args__ = (Index("ix_takes_session_created", "session_id", "created_at"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_take_id)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    # The request as submitted (JSON-able dict: lyrics, style, duration, steps, cfg, seed, edit, ...).
    request: Mapped[dict[str, Any]] = mapped_column(default=dict)
    status: Mapped[str] = mapped_column(String(16), default=QUEUED, index=True)
    progress: Mapped[float] = mapped_column(Float, default=0.0)  # 0..1 over the whole take
    phase: Mapped[str] = mapped_column(String(200), default="")  # e.g. "step 12/32", "queued (#2)"
    error: Mapped[str | None] = mapped_column(Text)
    # format -> path (relative to the data directory when inside it).
    files: Mapped[dict[str, Any]] = mapped_column(default=dict)
    seed: Mapped[int | None] = mapped_column(SEED_TYPE)  # the seed actually used (0 .. 2**32 - 1)
    variation: Mapped[int] = mapped_column(Integer, default=0)  # index within its Generate click
    timings: Mapped[dict[str, Any]] = mapped_column(default=dict)  # stage -> seconds
    models: Mapped[dict[str, Any]] = mapped_column(default=dict)  # model ids and versions
    record: Mapped[dict[str, Any]] = mapped_column(default=dict)  # the engine's full JSON record
    # Which process drives it ("host:pid:start"): restart recovery only interrupts takes whose process
    # is gone, so a studio starting next to a running `studio render --session` leaves its takes alone.
    runner: Mapped[str | None] = mapped_column(String(100))
    parent_id: Mapped[str | None] = mapped_column(ForeignKey("takes.id", ondelete="SET NULL"))
    name: Mapped[str] = mapped_column(String(200), default="")
    starred: Mapped[bool] = mapped_column(Boolean, default=False)
    # Soft delete so "undo" is one UPDATE; purged rows are never needed for a take that was undone.
    deleted_at: Mapped[datetime | None] = mapped_column(DateTime)

    session: Mapped[SessionRow] = relationship(back_populates="takes")

    @validates("phase", "name")
    def _cut(self, _key: str, value: Any) -> Any:
        return clean_text(value, 200)

    @validates("error")
    def _clean(self, _key: str, value: Any) -> Any:
        return clean_text(value)


class StyleRow(Base):
    """A named style: a text prompt and/or a saved 512-d embedding file (`.npy` in the data dir)."""

    __tablename__ = "styles"
    __table_args__ = (UniqueConstraint("owner", "name", name="uq_styles_owner_name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(200))
    # The owner who saved it (names are unique per owner); NULL for a style saved before styles had
    # owners, or by the operator: shared, usable by every owner, overwritten by none.
    owner: Mapped[str | None] = mapped_column(String(64), index=True)
    prompt: Mapped[str] = mapped_column(Text, default="")
    embedding_path: Mapped[str | None] = mapped_column(String(500))
    source: Mapped[str] = mapped_column(String(500), default="")  # "text" or the reference file's name
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)

    @validates("prompt")
    def _clean(self, _key: str, value: Any) -> Any:
        return clean_text(value)

    @validates("source")
    def _cut(self, _key: str, value: Any) -> Any:
        return clean_text(value, 500)


class ShareLinkRow(Base):
    """A read-only link to a session: `/?s=<token>`; revoking keeps the row so the link says so."""

    __tablename__ = "share_links"

    token: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_token)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime)

    session: Mapped[SessionRow] = relationship(back_populates="links")


class RunnerRow(Base):
    """A live process that drives takes, and its lease: it beats (`heartbeat_at`, the database's clock)
    at least every `lease_s` seconds while it runs.

    With one database shared by several hosts a pid check cannot judge another host's process; its takes
    are recovered ("interrupted") only once its lease has run out. Rows exist on PostgreSQL (and on
    SQLite only when a test asks for leases); a runner without a row is judged as before.
    """

    __tablename__ = "runners"

    id: Mapped[str] = mapped_column(String(100), primary_key=True)  # the runner id, "host:pid:start"
    host: Mapped[str] = mapped_column(String(100))
    pid_namespace: Mapped[str] = mapped_column(String(64), default="")  # see runner_id.pid_namespace
    started_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    heartbeat_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    lease_s: Mapped[float] = mapped_column(Float, default=30.0)
