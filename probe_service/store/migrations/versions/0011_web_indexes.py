"""Indexes for the web view's read operations (docs/ARCHITECTURE.md, "Web view").

- ``runs``: newest-first pages overall and per filter (state, outcome, reason, policy,
  plan), a covering index of finished runs for the farm's time buckets and latency, and
  one by outcome and reason for the farm's tallies.
- ``receipts``: by receipt time.
- ``plan_keys``: the snapshot and policy ids inside each plan's JSON body, one row per
  plan, written by a trigger on ``plans`` and filled here from the plans already stored
  (an expression index would do, but reflection tools cannot read one).
- ``inprocess_runs``: one row per receipt of a run that has no ``runs`` row (executed in
  a process, not through the queue), written by a trigger on ``receipts`` in the receipt's
  own transaction and filled here from the receipts already stored. Insert-only, like the
  receipts; it lets the runs list page through those runs without an anti-join over every
  receipt.
- ``farm_minutes``: per minute, outcome and reason, how many queued runs finished and
  their submit-to-receipt latency (sum and maximum), kept by a trigger on ``runs`` when a
  run becomes done, in that run's transaction, and filled here from the runs already done.
  The farm page reads a day from it (at most 1,440 rows per outcome and reason) instead of
  aggregating every run of the day.

Revision ID: 0011_web_indexes
Revises: 0006_signatures
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011_web_indexes"
down_revision = "0006_signatures"

_RUNS = {
    "ix_runs_submitted": ["submitted_ms", "run_id"],
    "ix_runs_state_submitted": ["state", "submitted_ms", "run_id"],
    "ix_runs_outcome_submitted": ["outcome", "submitted_ms", "run_id"],
    "ix_runs_reason_submitted": ["reason", "submitted_ms", "run_id"],
    "ix_runs_policy_submitted": ["policy_id", "submitted_ms", "run_id"],
    "ix_runs_plan_submitted": ["plan_id", "submitted_ms", "run_id"],
    "ix_runs_finished": ["finished_ms", "submitted_ms"],
    "ix_runs_outcome_reason_finished": ["outcome", "reason", "finished_ms"],
}
_INPROCESS = {
    "ix_inprocess_runs_created": ["created_at", "run_id"],
    "ix_inprocess_runs_outcome": ["outcome", "created_at", "run_id"],
    "ix_inprocess_runs_reason": ["reason", "created_at", "run_id"],
    "ix_inprocess_runs_policy": ["policy_id", "created_at", "run_id"],
    "ix_inprocess_runs_snapshot": ["snapshot_id", "created_at", "run_id"],
}
_PLAN_FIELDS = ("snapshot_id", "policy_id")
_COLUMNS = "run_id, created_at, plan_id, policy_id, snapshot_id, outcome, reason, receipt_sha256"


def _plan_field(dialect: str, row: str, name: str) -> str:
    if dialect == "postgresql":
        return f"(({row}.body)::json ->> '{name}')"
    return f"json_extract({row}.body, '$.{name}')"


def _plan_keys(dialect: str) -> None:
    op.create_table(
        "plan_keys",
        sa.Column("plan_id", sa.String(64), primary_key=True),
        sa.Column("snapshot_id", sa.String(64), nullable=True),
        sa.Column("policy_id", sa.String(128), nullable=True),
    )
    op.create_index("ix_plan_keys_snapshot", "plan_keys", ["snapshot_id"])
    op.create_index("ix_plan_keys_policy", "plan_keys", ["policy_id"])

    def values(row: str) -> str:
        fields = [_plan_field(dialect, row, f) for f in _PLAN_FIELDS]
        return ", ".join([f"{row}.plan_id", *fields])

    op.execute(
        f"INSERT INTO plan_keys (plan_id, snapshot_id, policy_id) SELECT {values('plans')} "  # noqa: S608
        "FROM plans"
    )
    insert = f"INSERT INTO plan_keys (plan_id, snapshot_id, policy_id) VALUES ({values('NEW')})"  # noqa: S608
    if dialect == "postgresql":
        op.execute(
            "CREATE FUNCTION probe_note_plan_keys() RETURNS trigger AS $$ BEGIN "
            f"{insert} ON CONFLICT (plan_id) DO NOTHING; RETURN NEW; END $$ LANGUAGE plpgsql"
        )
        op.execute(
            "CREATE TRIGGER plans_note_keys AFTER INSERT ON plans "
            "FOR EACH ROW EXECUTE FUNCTION probe_note_plan_keys()"
        )
    else:
        op.execute(
            f"CREATE TRIGGER plans_note_keys AFTER INSERT ON plans BEGIN "
            f"{insert} ON CONFLICT (plan_id) DO NOTHING; END"
        )


def _values(dialect: str, row: str) -> str:
    """The inprocess_runs values of receipt ``row`` (NEW in a trigger, a table otherwise)."""
    if dialect == "postgresql":
        field = "(({r}.body)::json -> 'committed' ->> '{f}')"
    else:
        field = "json_extract({r}.body, '$.committed.{f}')"
    return ", ".join(
        [
            f"{row}.run_id",
            f"{row}.created_at",
            f"{row}.plan_id",
            field.format(r=row, f="policy_id"),
            field.format(r=row, f="snapshot_id"),
            f"{row}.outcome",
            f"{row}.reason",
            f"{row}.receipt_sha256",
        ]
    )


def upgrade() -> None:
    dialect = op.get_context().dialect.name
    for name, columns in _RUNS.items():
        op.create_index(name, "runs", columns)
    op.create_index("ix_receipts_created", "receipts", ["created_at", "run_id"])
    _plan_keys(dialect)
    op.create_table(
        "inprocess_runs",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("created_at", sa.String(32), nullable=False),
        sa.Column("plan_id", sa.String(64), nullable=False),
        sa.Column("policy_id", sa.String(128), nullable=True),
        sa.Column("snapshot_id", sa.String(64), nullable=True),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("reason", sa.String(64), nullable=False),
        sa.Column("receipt_sha256", sa.String(64), nullable=False),
    )
    for name, columns in _INPROCESS.items():
        op.create_index(name, "inprocess_runs", columns)
    no_queue_row = "NOT EXISTS (SELECT 1 FROM runs WHERE runs.run_id = {r}.run_id)"
    # Every piece of these statements is a constant of this module: no input reaches them.
    op.execute(
        f"INSERT INTO inprocess_runs ({_COLUMNS}) SELECT {_values(dialect, 'receipts')} "  # noqa: S608
        f"FROM receipts WHERE {no_queue_row.format(r='receipts')}"
    )
    if dialect == "postgresql":
        op.execute(
            "CREATE FUNCTION probe_note_inprocess_run() RETURNS trigger AS $$ BEGIN "  # noqa: S608
            f"IF {no_queue_row.format(r='NEW')} THEN "
            f"INSERT INTO inprocess_runs ({_COLUMNS}) VALUES ({_values(dialect, 'NEW')}); "
            "END IF; RETURN NEW; END $$ LANGUAGE plpgsql"
        )
        op.execute(
            "CREATE TRIGGER receipts_note_inprocess_run AFTER INSERT ON receipts "
            "FOR EACH ROW EXECUTE FUNCTION probe_note_inprocess_run()"
        )
        op.execute(
            "CREATE TRIGGER inprocess_runs_immutable BEFORE UPDATE OR DELETE ON inprocess_runs "
            "FOR EACH ROW EXECUTE FUNCTION probe_refuse_change()"
        )
    else:
        op.execute(
            "CREATE TRIGGER receipts_note_inprocess_run AFTER INSERT ON receipts "  # noqa: S608
            f"WHEN {no_queue_row.format(r='NEW')} BEGIN "
            f"INSERT INTO inprocess_runs ({_COLUMNS}) VALUES ({_values(dialect, 'NEW')}); END"
        )
        for action in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER inprocess_runs_no_{action.lower()} BEFORE {action} "
                "ON inprocess_runs BEGIN "
                "SELECT RAISE(ABORT, 'inprocess_runs rows are immutable'); END"
            )
    _farm_minutes(dialect)


_FARM_KEY = "(NEW.finished_ms / 60000), COALESCE(NEW.outcome, ''), COALESCE(NEW.reason, '')"
_FARM_VALUES = (
    f"{_FARM_KEY}, 1, NEW.finished_ms - NEW.submitted_ms, NEW.finished_ms - NEW.submitted_ms"
)
_FARM_UPSERT = (
    "INSERT INTO farm_minutes (minute, outcome, reason, finished, latency_sum_ms, latency_max_ms) "  # noqa: S608
    f"VALUES ({_FARM_VALUES}) ON CONFLICT (minute, outcome, reason) DO UPDATE SET "
    "finished = farm_minutes.finished + 1, "
    "latency_sum_ms = farm_minutes.latency_sum_ms + excluded.latency_sum_ms, "
    "latency_max_ms = {greatest}(farm_minutes.latency_max_ms, excluded.latency_max_ms)"
)
_BECAME_DONE = "NEW.state = 'done' AND NEW.finished_ms IS NOT NULL"


def _farm_minutes(dialect: str) -> None:
    op.create_table(
        "farm_minutes",
        sa.Column("minute", sa.BigInteger, primary_key=True),
        sa.Column("outcome", sa.String(16), primary_key=True),
        sa.Column("reason", sa.String(64), primary_key=True),
        sa.Column("finished", sa.BigInteger, nullable=False),
        sa.Column("latency_sum_ms", sa.BigInteger, nullable=False),
        sa.Column("latency_max_ms", sa.BigInteger, nullable=False),
    )
    op.execute(
        "INSERT INTO farm_minutes (minute, outcome, reason, finished, latency_sum_ms, "
        "latency_max_ms) SELECT finished_ms / 60000, COALESCE(outcome, ''), "
        "COALESCE(reason, ''), COUNT(*), SUM(finished_ms - submitted_ms), "
        "MAX(finished_ms - submitted_ms) FROM runs "
        "WHERE state = 'done' AND finished_ms IS NOT NULL "
        "GROUP BY finished_ms / 60000, COALESCE(outcome, ''), COALESCE(reason, '')"
    )
    if dialect == "postgresql":
        op.execute(
            "CREATE FUNCTION probe_count_finished_run() RETURNS trigger AS $$ BEGIN "
            f"IF {_BECAME_DONE} AND (TG_OP = 'INSERT' OR OLD.state <> 'done') THEN "
            f"{_FARM_UPSERT.format(greatest='GREATEST')}; "
            "END IF; RETURN NEW; END $$ LANGUAGE plpgsql"
        )
        op.execute(
            "CREATE TRIGGER runs_count_finished AFTER INSERT OR UPDATE OF state ON runs "
            "FOR EACH ROW EXECUTE FUNCTION probe_count_finished_run()"
        )
        return
    upsert = _FARM_UPSERT.format(greatest="MAX")
    op.execute(
        "CREATE TRIGGER runs_count_finished_update AFTER UPDATE OF state ON runs "
        f"WHEN {_BECAME_DONE} AND OLD.state <> 'done' BEGIN {upsert}; END"
    )
    op.execute(
        f"CREATE TRIGGER runs_count_finished_insert AFTER INSERT ON runs WHEN {_BECAME_DONE} "
        f"BEGIN {upsert}; END"
    )


def downgrade() -> None:
    dialect = op.get_context().dialect.name
    if dialect == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS runs_count_finished ON runs")
        op.execute("DROP FUNCTION IF EXISTS probe_count_finished_run()")
    else:
        op.execute("DROP TRIGGER IF EXISTS runs_count_finished_update")
        op.execute("DROP TRIGGER IF EXISTS runs_count_finished_insert")
    op.drop_table("farm_minutes")
    op.execute(
        "DROP TRIGGER IF EXISTS receipts_note_inprocess_run"
        + (" ON receipts" if op.get_context().dialect.name == "postgresql" else "")
    )
    op.drop_table("inprocess_runs")
    if op.get_context().dialect.name == "postgresql":
        op.execute("DROP FUNCTION IF EXISTS probe_note_inprocess_run()")
    if dialect == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS plans_note_keys ON plans")
        op.execute("DROP FUNCTION IF EXISTS probe_note_plan_keys()")
    else:
        op.execute("DROP TRIGGER IF EXISTS plans_note_keys")
    op.drop_table("plan_keys")
    op.drop_index("ix_receipts_created", "receipts")
    for name in _RUNS:
        op.drop_index(name, "runs")
