"""Plans and receipts, insert-only.

Revision ID: 0002_plans
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_plans"
down_revision = "0001_foundation"

_IMMUTABLE = ("plans", "receipts")


def upgrade() -> None:
    op.create_table(
        "plans",
        sa.Column("plan_id", sa.String(64), primary_key=True),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("created_at", sa.String(32), nullable=False),
    )
    op.create_table(
        "receipts",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("receipt_sha256", sa.String(64), nullable=False),
        sa.Column("plan_id", sa.String(64), nullable=False),
        sa.Column("action_key", sa.String(64), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("reason", sa.String(64), nullable=False),
        sa.Column("reusable", sa.Boolean, nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("created_at", sa.String(32), nullable=False),
    )
    op.create_index("ix_receipts_action_key", "receipts", ["action_key"])
    op.create_index("ix_receipts_plan_id", "receipts", ["plan_id"])
    op.create_index("ix_receipts_sha256", "receipts", ["receipt_sha256"])
    if op.get_context().dialect.name == "postgresql":
        op.execute(
            "CREATE FUNCTION probe_refuse_change() RETURNS trigger AS $$ BEGIN "
            "RAISE EXCEPTION '% rows are immutable', TG_TABLE_NAME; END $$ LANGUAGE plpgsql"
        )
        for table in _IMMUTABLE:
            op.execute(
                f"CREATE TRIGGER {table}_immutable BEFORE UPDATE OR DELETE ON {table} "
                "FOR EACH ROW EXECUTE FUNCTION probe_refuse_change()"
            )
    else:
        for table in _IMMUTABLE:
            for action in ("UPDATE", "DELETE"):
                op.execute(
                    f"CREATE TRIGGER {table}_no_{action.lower()} BEFORE {action} ON {table} "
                    f"BEGIN SELECT RAISE(ABORT, '{table} rows are immutable'); END"
                )
