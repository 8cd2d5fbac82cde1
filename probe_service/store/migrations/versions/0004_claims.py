"""Claims: claims, evidence, baselines, dependency index, checks, obligations, audit.

Also creates, per dialect, the full-text index over claim statements (SQLite FTS5 virtual
table ``claim_fts``; PostgreSQL GIN index on ``to_tsvector``) and triggers that make
``claim_audit`` append-only and a claim row immutable once recorded.

Revision ID: 0004_claims
Revises: 0003_runs

Nothing here depends on the plans or runs tables; the chain is linear only so there is
one head.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_claims"
down_revision = "0003_runs"

_SERIAL = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _claim_fk(name: str = "claim_id", *, primary: bool = False) -> sa.Column[str]:
    return sa.Column(name, sa.String(40), sa.ForeignKey("claims.claim_id"), primary_key=primary)


def upgrade() -> None:
    _create_claims()
    _create_index_and_checks()
    _create_obligations_and_audit()
    if op.get_bind().dialect.name == "postgresql":
        _postgresql_extras()
    else:
        _sqlite_extras()


def _create_claims() -> None:
    op.create_table(
        "claims",
        sa.Column("claim_id", sa.String(40), primary_key=True),
        sa.Column("scope", sa.String(128), nullable=False, index=True),
        sa.Column("origin", sa.String(16), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("statement", sa.Text, nullable=False),
        sa.Column("question", sa.Text, nullable=True),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("snapshot_id", sa.String(64), nullable=False),
        sa.Column("boundary_key", sa.String(64), nullable=False, index=True),
        sa.Column("record_digest", sa.String(64), nullable=False),
        sa.Column("flagged", sa.String(32), nullable=True),
        sa.Column("created_at", sa.String(32), nullable=False),
    )
    op.create_table(
        "claim_evidence",
        _claim_fk(primary=True),
        sa.Column("position", sa.Integer, primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("receipt", sa.String(64), nullable=True),
        sa.Column("receipt_outcome", sa.String(16), nullable=True),
        sa.Column("path", sa.Text, nullable=True, index=True),
        sa.Column("span_start", sa.BigInteger, nullable=True),
        sa.Column("span_end", sa.BigInteger, nullable=True),
        sa.Column("sha256", sa.String(64), nullable=True),
        sa.Column("text", sa.Text, nullable=True),
    )
    op.create_table(
        "claim_dependencies",
        _claim_fk(primary=True),
        sa.Column("position", sa.Integer, primary_key=True),
        sa.Column("form", sa.String(16), nullable=False),
        sa.Column("baseline", sa.Text, nullable=False),
    )


def _create_index_and_checks() -> None:
    op.create_table(
        "claim_dep_paths",
        sa.Column("path", sa.Text, primary_key=True),
        _claim_fk(primary=True),
        sa.Column("scope", sa.String(128), nullable=False),
    )
    op.create_table(
        "claim_dep_domains",
        sa.Column("prefix", sa.Text, primary_key=True),
        _claim_fk(primary=True),
        sa.Column("glob", sa.Text, primary_key=True),
        sa.Column("scope", sa.String(128), nullable=False),
    )
    op.create_table(
        "claim_checks",
        sa.Column("check_id", _SERIAL, primary_key=True, autoincrement=True),
        _claim_fk(),
        sa.Column("scope", sa.String(128), nullable=False),
        sa.Column("snapshot_id", sa.String(64), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("reasons", sa.Text, nullable=False),
        sa.Column("checked_at", sa.String(32), nullable=False),
        sa.Index("ix_claim_checks_claim", "claim_id", "snapshot_id"),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "claim_supersessions",
        _claim_fk("predecessor_id", primary=True),
        sa.Column("successor_id", sa.String(40), sa.ForeignKey("claims.claim_id"), unique=True),
        sa.Column("scope", sa.String(128), nullable=False),
        sa.Column("rationale", sa.Text, nullable=False),
        sa.Column("created_at", sa.String(32), nullable=False),
    )
    op.create_table(
        "claim_tombstones",
        _claim_fk(primary=True),
        sa.Column("scope", sa.String(128), nullable=False),
        sa.Column("boundary_key", sa.String(64), nullable=False, index=True),
        sa.Column("rationale", sa.Text, nullable=False),
        sa.Column("withdrawn_at", sa.String(32), nullable=False),
    )


def _create_obligations_and_audit() -> None:
    op.create_table(
        "obligations",
        sa.Column("obligation_id", sa.String(40), primary_key=True),
        _claim_fk(),
        sa.Column("scope", sa.String(128), nullable=False, index=True),
        sa.Column("snapshot_id", sa.String(64), nullable=False),
        sa.Column("from_snapshot_id", sa.String(64), nullable=True),
        sa.Column("applicability", sa.String(16), nullable=False),
        sa.Column("reasons", sa.Text, nullable=False),
        sa.Column("opened_at", sa.String(32), nullable=False),
        sa.UniqueConstraint("claim_id", "snapshot_id", name="uq_obligations_claim_snapshot"),
    )
    op.create_table(
        "obligation_resolutions",
        sa.Column(
            "obligation_id",
            sa.String(40),
            sa.ForeignKey("obligations.obligation_id"),
            primary_key=True,
        ),
        sa.Column("resolution", sa.String(16), nullable=False),
        sa.Column("rationale", sa.Text, nullable=False),
        sa.Column("receipt", sa.String(64), nullable=True),
        sa.Column("successor_claim_id", sa.String(40), nullable=True),
        sa.Column("resolved_at", sa.String(32), nullable=False),
    )
    op.create_table(
        "claim_audit",
        sa.Column("audit_id", _SERIAL, primary_key=True, autoincrement=True),
        sa.Column("at", sa.String(32), nullable=False),
        sa.Column("operation", sa.String(64), nullable=False),
        sa.Column("interface", sa.String(32), nullable=False),
        sa.Column("scope", sa.String(128), nullable=False),
        sa.Column("subject_ids", sa.Text, nullable=False),
        sa.Column("before_digest", sa.String(64), nullable=True),
        sa.Column("after_digest", sa.String(64), nullable=True),
        sqlite_autoincrement=True,
    )


def _sqlite_extras() -> None:
    op.execute(
        "CREATE VIRTUAL TABLE claim_fts USING fts5("
        "claim_id UNINDEXED, scope UNINDEXED, body, tokenize='porter unicode61')"
    )
    for table, verbs in (("claim_audit", ("UPDATE", "DELETE")), ("claims", ("UPDATE",))):
        for verb in verbs:
            op.execute(
                f"CREATE TRIGGER {table}_no_{verb.lower()} BEFORE {verb} ON {table} "
                f"BEGIN SELECT RAISE(ABORT, '{table} is append-only'); END"
            )


def _postgresql_extras() -> None:
    op.execute(
        "CREATE INDEX ix_claims_fts ON claims USING GIN "
        "(to_tsvector('english', coalesce(question, '') || ' ' || statement))"
    )
    op.execute(
        "CREATE FUNCTION claims_append_only() RETURNS trigger LANGUAGE plpgsql AS $$ "
        # restrict_violation is an integrity error, so the store maps it to Conflict.
        "BEGIN RAISE EXCEPTION '% is append-only', TG_TABLE_NAME "
        "USING ERRCODE = 'restrict_violation'; END $$"
    )
    op.execute(
        "CREATE TRIGGER claim_audit_append_only BEFORE UPDATE OR DELETE ON claim_audit "
        "FOR EACH ROW EXECUTE FUNCTION claims_append_only()"
    )
    op.execute(
        "CREATE TRIGGER claim_audit_no_truncate BEFORE TRUNCATE ON claim_audit "
        "FOR EACH STATEMENT EXECUTE FUNCTION claims_append_only()"
    )
    op.execute(
        "CREATE TRIGGER claims_no_update BEFORE UPDATE ON claims "
        "FOR EACH ROW EXECUTE FUNCTION claims_append_only()"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS claims_no_update ON claims")
        op.execute("DROP TRIGGER IF EXISTS claim_audit_no_truncate ON claim_audit")
        op.execute("DROP TRIGGER IF EXISTS claim_audit_append_only ON claim_audit")
        op.execute("DROP FUNCTION IF EXISTS claims_append_only()")
    else:
        op.execute("DROP TABLE IF EXISTS claim_fts")
    for table in (
        "claim_audit",
        "obligation_resolutions",
        "obligations",
        "claim_tombstones",
        "claim_supersessions",
        "claim_checks",
        "claim_dep_domains",
        "claim_dep_paths",
        "claim_dependencies",
        "claim_evidence",
        "claims",
    ):
        op.drop_table(table)
