"""Events without a farm-wide lock (docs/ARCHITECTURE.md, "Event cursor").

Before, every event-writing commit on PostgreSQL took one transaction-scoped advisory lock
so that cursors were handed out in commit order. Writers now insert into
``event_outbox`` without a lock; readers move committed rows into ``events`` and number
them there. Nothing already in ``events`` changes.

Revision ID: 0012_event_outbox
Revises: 0011_rechecks
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012_event_outbox"
down_revision = "0011_rechecks"


def upgrade() -> None:
    op.create_table(
        "event_outbox",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("subject", sa.String(128), nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("created_at", sa.String(32), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("event_outbox")
