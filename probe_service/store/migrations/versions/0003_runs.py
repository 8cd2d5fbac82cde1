"""Runs: queued work, leases and attempts.

Revision ID: 0003_runs
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_runs"
down_revision = "0002_plans"


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("batch_id", sa.String(64), nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("plan_id", sa.String(64), nullable=False),
        sa.Column("policy_id", sa.String(128), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("lease_owner", sa.String(255)),
        sa.Column("lease_expires_ms", sa.BigInteger),
        sa.Column("enqueued_ms", sa.BigInteger),
        sa.Column("action_key", sa.String(64)),
        sa.Column("receipt_sha256", sa.String(64)),
        sa.Column("outcome", sa.String(16)),
        sa.Column("reason", sa.String(64)),
        sa.Column("submitted_ms", sa.BigInteger, nullable=False),
        sa.Column("finished_ms", sa.BigInteger),
    )
    op.create_index("ix_runs_state_lease", "runs", ["state", "lease_expires_ms"])
    op.create_index("ix_runs_batch", "runs", ["batch_id", "seq"])
