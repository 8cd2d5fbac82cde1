"""Trust: durable event-consumer cursors, who resolved an obligation, per-run reuse.

- ``event_consumers``: one row per named consumer of ``knowledge_events``, holding the
  cursor it last acknowledged, so ``events --consumer NAME`` resumes there.
- ``obligation_resolutions`` gains ``interface`` and ``resolved_by``: every resolution
  keeps which interface and which actor resolved it, beside its rationale.
- ``claim_evidence`` gains ``plan_id``: a plan a claim declares as the probe that rechecks it.
- ``runs`` gains ``reuse`` (the submitter's choice; ``submit --no-reuse`` stores false) and
  ``reused`` (whether the worker served a stored receipt instead of executing).

Revision ID: 0005_trust
Revises: 0004_claims
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_trust"
down_revision = "0004_claims"


def upgrade() -> None:
    op.create_table(
        "event_consumers",
        sa.Column("consumer", sa.String(128), primary_key=True),
        sa.Column("cursor", sa.BigInteger, nullable=False),
        sa.Column("acknowledged_at", sa.String(32), nullable=False),
    )
    with op.batch_alter_table("obligation_resolutions") as batch:
        batch.add_column(sa.Column("interface", sa.String(32), nullable=True))
        batch.add_column(sa.Column("resolved_by", sa.String(128), nullable=True))
    with op.batch_alter_table("claim_evidence") as batch:
        batch.add_column(sa.Column("plan_id", sa.String(64), nullable=True))
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("reuse", sa.Boolean, nullable=False, server_default=sa.true()))
        batch.add_column(sa.Column("reused", sa.Boolean, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("reused")
        batch.drop_column("reuse")
    with op.batch_alter_table("claim_evidence") as batch:
        batch.drop_column("plan_id")
    with op.batch_alter_table("obligation_resolutions") as batch:
        batch.drop_column("resolved_by")
        batch.drop_column("interface")
    op.drop_table("event_consumers")
