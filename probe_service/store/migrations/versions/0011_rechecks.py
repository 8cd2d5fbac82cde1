"""Rechecks in one step (docs/ARCHITECTURE.md, "Recheck").

- ``rechecks``: one ``obligation_recheck`` request that queued reruns, keyed by the batch
  of its runs: the target snapshot, the scope, who asked and through which interface.
- ``recheck_items``: each rerun: the obligation and claim, the evidence it repeats (a
  receipt, or a plan the claim declares), the new plan and its policy id, and the run.
- ``recheck_settlements``: written once per recheck, in the transaction of the
  resolutions it made; its primary key makes the settlement exactly-once.

Every row is inserted once and never updated.

Revision ID: 0011_rechecks
Revises: 0010_stat_packs
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011_rechecks"
down_revision = "0010_stat_packs"


def upgrade() -> None:
    op.create_table(
        "rechecks",
        sa.Column("batch_id", sa.String(64), primary_key=True),
        sa.Column("snapshot_id", sa.String(64), nullable=False),
        sa.Column("scope", sa.String(128), nullable=True),
        sa.Column("interface", sa.String(32), nullable=False),
        sa.Column("requested_by", sa.String(128), nullable=True),
        sa.Column("requested_at", sa.String(32), nullable=False),
    )
    op.create_table(
        "recheck_items",
        sa.Column("batch_id", sa.String(64), sa.ForeignKey("rechecks.batch_id"), primary_key=True),
        sa.Column("position", sa.Integer, primary_key=True),
        sa.Column("obligation_id", sa.String(40), nullable=False, index=True),
        sa.Column("claim_id", sa.String(40), nullable=False),
        sa.Column("evidence_kind", sa.String(16), nullable=False),
        sa.Column("evidence", sa.String(64), nullable=False),
        sa.Column("plan_id", sa.String(64), nullable=False),
        sa.Column("policy_id", sa.String(128), nullable=False),
        sa.Column("run_id", sa.String(64), nullable=False, index=True),
    )
    op.create_table(
        "recheck_settlements",
        sa.Column("batch_id", sa.String(64), sa.ForeignKey("rechecks.batch_id"), primary_key=True),
        sa.Column("settled_at", sa.String(32), nullable=False),
        sa.Column("settled_by", sa.String(255), nullable=False),
        sa.Column("verdicts", sa.Text, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("recheck_settlements")
    op.drop_table("recheck_items")
    op.drop_table("rechecks")
