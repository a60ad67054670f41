"""saved styles belong to an owner

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-06 04:10:00

Saved styles were global: any owner token could overwrite any style and `/styles` listed every owner's
prompts (issue 27, finding 4). A style now has an `owner` (the owner id of the token that saved it) and
its name is unique per owner. Rows saved before keep `owner` NULL: shared styles, which every owner may
use and none may overwrite (saving that name makes the owner's own style). SQLite cannot drop the old
unnamed UNIQUE(name), so there the table is rebuilt; PostgreSQL alters it in place.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

COLUMNS = ("id", "name", "prompt", "embedding_path", "source", "created_at")


def _styles_table(name: str, *, owned: bool) -> None:
    owner = [sa.Column("owner", sa.String(length=64), nullable=True)] if owned else []
    unique = sa.UniqueConstraint("owner", "name", name="uq_styles_owner_name") if owned else sa.UniqueConstraint("name")
    op.create_table(
        name,
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        *owner,
        sa.Column("prompt", sa.Text(), nullable=False),
        sa.Column("embedding_path", sa.String(length=500), nullable=True),
        sa.Column("source", sa.String(length=500), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        unique,
    )


def _rebuild(owned: bool) -> None:
    """SQLite: copy `styles` into a table of the other shape and put it in its place."""
    cols = ", ".join(COLUMNS)
    _styles_table("styles_rebuilt", owned=owned)
    op.execute(f"INSERT INTO styles_rebuilt ({cols}) SELECT {cols} FROM styles")
    op.drop_table("styles")
    op.rename_table("styles_rebuilt", "styles")


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _rebuild(owned=True)
    else:
        op.add_column("styles", sa.Column("owner", sa.String(length=64), nullable=True))
        op.drop_constraint("styles_name_key", "styles", type_="unique")
        op.create_unique_constraint("uq_styles_owner_name", "styles", ["owner", "name"])
    op.create_index("ix_styles_owner", "styles", ["owner"], unique=False)


def downgrade() -> None:
    bind = op.get_bind()
    clash = bind.execute(sa.text("SELECT name FROM styles GROUP BY name HAVING COUNT(*) > 1")).first()
    if clash is not None:
        # Two owners saved a style of this name: one global name cannot hold both. Refuse, lose nothing.
        raise RuntimeError(f"cannot downgrade: several owners have a style named {clash[0]!r}")
    op.drop_index("ix_styles_owner", table_name="styles")
    if bind.dialect.name == "sqlite":
        _rebuild(owned=False)
    else:
        op.drop_constraint("uq_styles_owner_name", "styles", type_="unique")
        op.create_unique_constraint("styles_name_key", "styles", ["name"])
        op.drop_column("styles", "owner")
