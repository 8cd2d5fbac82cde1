"""The stat cache as one packed row per capture root (docs/ARCHITECTURE.md, "Snapshot capture").

``stat_cache`` kept a row per file: loading 10,000 rows cost about as much as the two
``lstat`` passes of an unchanged recapture, and a cold capture upserted 10,000 rows.
``stat_packs`` keeps each root's entries as one packed value, read and replaced whole.
The old rows are a cache: they are dropped, and the next capture of each root reads its
files once more.

Revision ID: 0010_stat_packs
Revises: 0009_refute_confirmation
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_stat_packs"
down_revision = "0009_refute_confirmation"


def upgrade() -> None:
    op.create_table(
        "stat_packs",
        sa.Column("root", sa.Text, primary_key=True),
        sa.Column("entries", sa.LargeBinary, nullable=False),
    )
    op.drop_table("stat_cache")


def downgrade() -> None:
    op.create_table(
        "stat_cache",
        sa.Column("root", sa.Text, primary_key=True),
        sa.Column("path", sa.Text, primary_key=True),
        sa.Column("size", sa.BigInteger, nullable=False),
        sa.Column("mtime_ns", sa.BigInteger, nullable=False),
        sa.Column("ctime_ns", sa.BigInteger, nullable=False),
        sa.Column("inode", sa.BigInteger, nullable=False),
        sa.Column("mode", sa.Integer, nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
    )
    op.drop_table("stat_packs")
