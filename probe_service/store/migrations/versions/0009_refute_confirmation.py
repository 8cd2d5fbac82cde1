"""Refutations are confirmed before they are reused (docs/ARCHITECTURE.md, "Confirming a
refutation").

- ``pending_confirmations``: a queued run whose first execution refuted, waiting for its
  confirmation on another worker: the first worker and that execution's unsigned receipt
  fields. The row is written when the run goes back to the queue and deleted when the
  run finishes, both in the run's own transactions.
- ``worker_heartbeats``: each worker process that can run probes notes itself (owner, each
  queue it consumes, queue namespace, last seen) every janitor tick, so a worker knows
  whether another one is alive on the queue it sends its refutation back to.

Receipts are left as they are (they are insert-only): a refutation an older release
stored as reusable carries no ``confirmation``, and the reuse lookup refuses it.

Revision ID: 0009_refute_confirmation
Revises: 0008_web_indexes
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_refute_confirmation"
down_revision = "0008_web_indexes"


def upgrade() -> None:
    op.create_table(
        "pending_confirmations",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("first_worker", sa.String(255), nullable=False),
        sa.Column("draft", sa.Text, nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "worker_heartbeats",
        sa.Column("owner", sa.String(255), primary_key=True),
        sa.Column("queue", sa.String(128), primary_key=True),
        sa.Column("namespace", sa.String(128), nullable=False),
        sa.Column("seen_ms", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("worker_heartbeats")
    op.drop_table("pending_confirmations")
