"""SQLAlchemy 2.0-style typed models: sessions, takes, saved styles, share links.

The Alembic migrations in `alembic/versions/` must produce exactly this schema (a test compares them);
change a model only together with a new migration.
"""

from __future__ import annotations

import secrets
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import JSON, Boolean, DateTime, Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

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


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


class SessionRow(Base):
    """A musician's working session: the last form inputs and every take made in it."""

    __tablename__ = "sessions"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_token)
    title: Mapped[str] = mapped_column(String(200), default="Untitled session")
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
    seed: Mapped[int | None] = mapped_column(Integer)  # the seed actually used
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


class StyleRow(Base):
    """A named style: a text prompt and/or a saved 512-d embedding file (`.npy` in the data dir)."""

    __tablename__ = "styles"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    prompt: Mapped[str] = mapped_column(Text, default="")
    embedding_path: Mapped[str | None] = mapped_column(String(500))
    source: Mapped[str] = mapped_column(String(500), default="")  # "text" or the reference file's name
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class ShareLinkRow(Base):
    """A read-only link to a session: `/?s=<token>`; revoking keeps the row so the link says so."""

    __tablename__ = "share_links"

    token: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_token)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime)

    session: Mapped[SessionRow] = relationship(back_populates="links")
