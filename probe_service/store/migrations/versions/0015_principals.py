"""Principals and review requests (docs/ARCHITECTURE.md, "Principals and clearing").

- ``claim_audit`` gains ``actor`` and ``actor_kind``: who made each audited write, from the
  operating system (an entry written before this migration has neither);
- ``turns`` gains ``actor``: who began the turn;
- ``review_requests``: a resolution a clearing rule sends to a second party, insert-only;
- ``review_decisions``: its approval or rejection, at most one per request (the primary key).

Revision ID: 0015_principals
Revises: 0014_turns
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015_principals"
down_revision = "0014_turns"


def upgrade() -> None:
    # Plain ADD COLUMN (never a batch copy): the table keeps its append-only triggers.
    op.add_column("claim_audit", sa.Column("actor", sa.String(200), nullable=True))
    op.add_column("claim_audit", sa.Column("actor_kind", sa.String(16), nullable=True))
    op.add_column("turns", sa.Column("actor", sa.String(200), nullable=True))
    op.create_table(
        "review_requests",
        sa.Column("review_id", sa.String(40), primary_key=True),
        sa.Column(
            "obligation_id",
            sa.String(40),
            sa.ForeignKey("obligations.obligation_id"),
            nullable=False,
            index=True,
        ),
        sa.Column("scope", sa.String(128), nullable=False, index=True),
        sa.Column("resolution", sa.String(16), nullable=False),
        sa.Column("rationale", sa.Text, nullable=False),
        sa.Column("successor_claim_id", sa.String(40), nullable=True),
        sa.Column("requested_by", sa.String(200), nullable=False),
        sa.Column("requested_kind", sa.String(16), nullable=False),
        sa.Column("interface", sa.String(32), nullable=False),
        sa.Column("requested_at", sa.String(32), nullable=False),
    )
    op.create_table(
        "review_decisions",
        sa.Column(
            "review_id",
            sa.String(40),
            sa.ForeignKey("review_requests.review_id"),
            primary_key=True,
        ),
        sa.Column("decision", sa.String(16), nullable=False),
        sa.Column("rationale", sa.Text, nullable=False),
        sa.Column("decided_by", sa.String(200), nullable=False),
        sa.Column("interface", sa.String(32), nullable=False),
        sa.Column("decided_at", sa.String(32), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("review_decisions")
    op.drop_table("review_requests")
    op.drop_column("turns", "actor")
    op.drop_column("claim_audit", "actor_kind")
    op.drop_column("claim_audit", "actor")
