"""runner leases; 64-bit seeds on PostgreSQL

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-03 17:00:00

`runners`: one row per process that drives takes, with its heartbeat, so that on a database shared by
several hosts a process that is gone is told apart from a live one on another host (a pid check cannot).
Seeds reach 2**32 - 1, past PostgreSQL's 32-bit INTEGER: BIGINT there. SQLite's INTEGER already holds
64 bits, so SQLite files are not rewritten for it (the model says the same: BigInteger, INTEGER on SQLite).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runners",
        sa.Column("id", sa.String(length=100), nullable=False),
        sa.Column("host", sa.String(length=100), nullable=False),
        sa.Column("pid_namespace", sa.String(length=64), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(), nullable=False),
        sa.Column("lease_s", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    if op.get_bind().dialect.name != "sqlite":
        op.alter_column("takes", "seed", existing_type=sa.Integer(), type_=sa.BigInteger(),
                        existing_nullable=True)


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        # Seeds past 2**31 - 1 do not fit the old column: refuse rather than lose them.
        op.alter_column("takes", "seed", existing_type=sa.BigInteger(), type_=sa.Integer(),
                        existing_nullable=True)
    op.drop_table("runners")
