"""Indexes for the web view's read operations (docs/ARCHITECTURE.md, "Web view").

- ``runs``: newest-first pages overall and per filter (state, outcome, reason, policy),
  the runs of a plan (the snapshot filter), and a covering index over finished runs for
  the farm statistics (time buckets, latency, outcomes, reasons) in one range scan.
- ``receipts``: newest-first pages of runs executed in a process, by receipt time.
- ``plans``: the snapshot and policy ids inside a plan's JSON body, as expression
  indexes spelled exactly as ``queue.listing.plan_field`` queries them.

Revision ID: 0011_web_indexes
Revises: 0006_signatures
"""

from __future__ import annotations

from alembic import op

revision = "0011_web_indexes"
down_revision = "0006_signatures"

_RUNS = {
    "ix_runs_submitted": ["submitted_ms", "run_id"],
    "ix_runs_state_submitted": ["state", "submitted_ms", "run_id"],
    "ix_runs_outcome_submitted": ["outcome", "submitted_ms", "run_id"],
    "ix_runs_reason_submitted": ["reason", "submitted_ms", "run_id"],
    "ix_runs_policy_submitted": ["policy_id", "submitted_ms", "run_id"],
    "ix_runs_plan": ["plan_id"],
    "ix_runs_finished": ["finished_ms", "submitted_ms", "outcome", "reason"],
}
_PLAN_FIELDS = ("snapshot_id", "policy_id")


def _plan_expr(dialect: str, name: str) -> str:
    if dialect == "postgresql":
        return f"((body)::json ->> '{name}')"
    return f"json_extract(body, '$.{name}')"


def upgrade() -> None:
    for name, columns in _RUNS.items():
        op.create_index(name, "runs", columns)
    op.create_index("ix_receipts_created", "receipts", ["created_at", "run_id"])
    dialect = op.get_context().dialect.name
    for field in _PLAN_FIELDS:
        op.execute(f"CREATE INDEX ix_plans_{field} ON plans ({_plan_expr(dialect, field)})")


def downgrade() -> None:
    for field in _PLAN_FIELDS:
        op.execute(f"DROP INDEX ix_plans_{field}")
    op.drop_index("ix_receipts_created", "receipts")
    for name in _RUNS:
        op.drop_index(name, "runs")
