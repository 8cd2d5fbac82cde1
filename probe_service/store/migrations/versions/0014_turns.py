"""Agent turns, blocks and dispatch decisions (docs/ARCHITECTURE.md, "The agent's turn").

- ``turns``: one row per ``turn_begin`` (root, scope, snapshot, the claims it rests on);
- ``turn_answers``: the answer ``turn_end`` recorded and whether the tree stayed still;
- ``turn_blocks``: a stale plan under a root and scope, until a later stable answer;
- ``dispatch_decisions``: every ``dispatch_check`` verdict with its posture and reasons.

Revision ID: 0014_turns
Revises: 0013_bundles
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014_turns"
down_revision = "0013_bundles"


def upgrade() -> None:
    op.create_table(
        "turns",
        sa.Column(
            "seq",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("turn_id", sa.String(40), nullable=False, unique=True),
        sa.Column("root", sa.Text, nullable=False),
        sa.Column("scope", sa.String(128), nullable=False),
        sa.Column("question", sa.Text, nullable=True),
        sa.Column("symbols", sa.Text, nullable=False),
        sa.Column("snapshot_id", sa.String(64), nullable=False),
        sa.Column("rests_on", sa.Text, nullable=False),
        sa.Column("interface", sa.String(32), nullable=False),
        sa.Column("session", sa.String(200), nullable=True, index=True),
        sa.Column("began_at", sa.String(32), nullable=False),
        sa.Column("expires_at", sa.String(32), nullable=False),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "turn_answers",
        sa.Column("turn_id", sa.String(40), sa.ForeignKey("turns.turn_id"), primary_key=True),
        sa.Column("claim_id", sa.String(40), nullable=False),
        sa.Column("end_snapshot_id", sa.String(64), nullable=False),
        sa.Column("stable", sa.Boolean, nullable=False),
        sa.Column("ended_at", sa.String(32), nullable=False),
    )
    op.create_table(
        "turn_blocks",
        sa.Column("block_id", sa.String(40), primary_key=True),
        sa.Column("root", sa.Text, nullable=False),
        sa.Column("scope", sa.String(128), nullable=False),
        sa.Column("turn_id", sa.String(40), nullable=False),
        sa.Column("turn_seq", sa.Integer, nullable=False),
        sa.Column("claim_id", sa.String(40), nullable=False),
        sa.Column("snapshot_id", sa.String(64), nullable=False),
        sa.Column("reasons", sa.Text, nullable=False),
        sa.Column("opened_at", sa.String(32), nullable=False),
        sa.Column("cleared_by", sa.String(40), nullable=True),
        sa.Column("cleared_at", sa.String(32), nullable=True),
    )
    op.create_table(
        "dispatch_decisions",
        sa.Column("decision_id", sa.String(40), primary_key=True),
        sa.Column("turn_id", sa.String(40), nullable=False, index=True),
        sa.Column("tool", sa.String(200), nullable=False),
        sa.Column("arguments_sha256", sa.String(64), nullable=False),
        sa.Column("snapshot_id", sa.String(64), nullable=True),
        sa.Column("posture", sa.String(16), nullable=False),
        sa.Column("verdict", sa.String(16), nullable=False),
        sa.Column("reasons", sa.Text, nullable=False),
        sa.Column("decided_at", sa.String(32), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("dispatch_decisions")
    op.drop_table("turn_blocks")
    op.drop_table("turn_answers")
    op.drop_table("turns")
