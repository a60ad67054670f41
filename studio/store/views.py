"""Plain, detached views of store rows: what the studio, the renderer and API clients get back.

Rows never leave the store (no lazy loads on closed ORM sessions from other threads); these frozen
dataclasses do.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from .tables import ACTIVE_STATUSES, SessionRow, ShareLinkRow, StyleRow, TakeRow


@dataclass(frozen=True)
class SessionInfo:
    id: str
    title: str
    owner: str | None
    created_at: datetime
    updated_at: datetime
    inputs: dict[str, Any]
    lyrics: str
    style: str
    copied_from: str | None
    take_count: int = 0

    @classmethod
    def of(cls, row: SessionRow, take_count: int = 0) -> SessionInfo:
        return cls(
            id=row.id,
            title=row.title,
            owner=row.owner,
            created_at=row.created_at,
            updated_at=row.updated_at,
            inputs=dict(row.inputs or {}),
            lyrics=row.lyrics,
            style=row.style,
            copied_from=row.copied_from,
            take_count=take_count,
        )


@dataclass(frozen=True)
class TakeInfo:
    id: str
    session_id: str
    created_at: datetime
    updated_at: datetime
    request: dict[str, Any]
    status: str
    progress: float
    phase: str
    error: str | None
    # format -> absolute path (the store keeps paths relative to its data directory)
    files: dict[str, str]
    seed: int | None
    variation: int
    timings: dict[str, Any]
    models: dict[str, Any]
    record: dict[str, Any]
    parent_id: str | None
    name: str
    starred: bool
    deleted: bool
    runner: str | None = field(default=None, repr=False)

    @property
    def active(self) -> bool:
        return self.status in ACTIVE_STATUSES

    @property
    def label(self) -> str:
        # The time it was asked for reads better than an id; variations of one click get their number.
        several = self.variation or int(self.request.get("variations") or 1) > 1
        number = f" #{self.variation + 1}" if several else ""
        return self.name or f"Take {self.created_at:%H:%M:%S}{number}"

    def file(self, fmt: str) -> Path | None:
        path = self.files.get(fmt)
        return Path(path) if path else None

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form (for API endpoints and "full record" views)."""
        out = asdict(self)
        out["created_at"] = self.created_at.isoformat() + "Z"
        out["updated_at"] = self.updated_at.isoformat() + "Z"
        out.pop("runner", None)
        return out

    @classmethod
    def of(cls, row: TakeRow, data_dir: Path) -> TakeInfo:
        files = {fmt: str(_absolute(p, data_dir)) for fmt, p in (row.files or {}).items()}
        return cls(
            id=row.id,
            session_id=row.session_id,
            created_at=row.created_at,
            updated_at=row.updated_at,
            request=dict(row.request or {}),
            status=row.status,
            progress=row.progress,
            phase=row.phase,
            error=row.error,
            files=files,
            seed=row.seed,
            variation=row.variation,
            timings=dict(row.timings or {}),
            models=dict(row.models or {}),
            record=dict(row.record or {}),
            parent_id=row.parent_id,
            name=row.name,
            starred=row.starred,
            deleted=row.deleted_at is not None,
            runner=row.runner,
        )


@dataclass(frozen=True)
class StyleInfo:
    id: int
    name: str
    prompt: str
    embedding_path: str | None
    source: str
    created_at: datetime
    owner: str | None = None  # None: a shared style (see Store.save_style)

    @classmethod
    def of(cls, row: StyleRow, data_dir: Path) -> StyleInfo:
        emb = str(_absolute(row.embedding_path, data_dir)) if row.embedding_path else None
        return cls(row.id, row.name, row.prompt, emb, row.source, row.created_at, row.owner)


@dataclass(frozen=True)
class ShareInfo:
    token: str
    session_id: str
    created_at: datetime
    revoked: bool

    @property
    def url_path(self) -> str:
        return f"/?s={self.token}"

    @classmethod
    def of(cls, row: ShareLinkRow) -> ShareInfo:
        return cls(row.token, row.session_id, row.created_at, row.revoked_at is not None)


def _absolute(path: str, data_dir: Path) -> Path:
    p = Path(path)
    return p if p.is_absolute() else data_dir / p


def relative_to_data(path: str | Path, data_dir: Path) -> str:
    """Store paths inside the data directory relative to it, so a moved data directory still works."""
    p = Path(path).resolve()
    try:
        return str(p.relative_to(data_dir.resolve()))
    except ValueError:
        return str(p)
