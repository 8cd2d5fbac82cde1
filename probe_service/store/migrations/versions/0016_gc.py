"""Retention and gc (docs/ARCHITECTURE.md, "Retention and gc").

- ``gc_tombstones``: one row per gc batch, written in the batch's own transaction: the
  kind, how many objects, their logical and stored bytes, the SHA-256 of their sorted
  ids, the retention's digest, who ran it, and for events the highest cursor removed
  (the compaction floor). Insert-only (triggers refuse UPDATE and DELETE).
- ``gc_token``: empty outside a gc batch. The gc path inserts a row at the start of a
  batch's transaction and deletes it before commit, so no other transaction ever sees
  one; the append-only triggers of plans, receipts, envelopes and in-process runs let a
  DELETE through only while it is visible, i.e. only inside a gc batch. UPDATE stays
  refused, and ``claim_audit`` stays append-only outright.
- ``gc_lock``: who holds (or last held) the store's gc lock, so a second gc's refusal
  names it. The lock itself is a PostgreSQL session advisory lock or, on SQLite, an
  ``flock`` beside the database: both end with the process, so a killed gc leaves none.
- ``blobs.touched_ms``: when a writer last stored (or found already stored) the blob; a
  capture deduplicating against an old blob touches it, so gc's grace period covers it.
  Rows written before this revision keep NULL (older than any grace period).

Revision ID: 0016_gc
Revises: 0015_principals
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016_gc"
down_revision = "0015_principals"

#: The insert-only tables whose rows gc may remove, with their 0002/0006/0008 triggers.
_GUARDED = ("plans", "receipts", "receipt_signatures", "inprocess_runs")
_SERIAL = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "gc_tombstones",
        sa.Column("batch_id", _SERIAL, primary_key=True, autoincrement=True),
        sa.Column("at", sa.String(32), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("removed", sa.Integer, nullable=False),
        sa.Column("logical_bytes", sa.BigInteger, nullable=False),
        sa.Column("stored_bytes", sa.BigInteger, nullable=False),
        sa.Column("ids_sha256", sa.String(64), nullable=False),
        sa.Column("policy_digest", sa.String(64), nullable=False),
        sa.Column("ran_by", sa.String(255), nullable=False),
        sa.Column("floor", sa.BigInteger, nullable=True),
        sa.Index("ix_gc_tombstones_kind", "kind", "floor"),
        sqlite_autoincrement=True,
    )
    op.create_table("gc_token", sa.Column("holder", sa.String(255), primary_key=True))
    op.create_table(
        "gc_lock",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("holder", sa.String(255), nullable=False),
        sa.Column("since", sa.String(32), nullable=False),
    )
    with op.batch_alter_table("blobs") as batch:
        batch.add_column(sa.Column("touched_ms", sa.BigInteger, nullable=True))
    if op.get_context().dialect.name == "postgresql":
        _postgresql_triggers()
    else:
        _sqlite_triggers()


def _postgresql_triggers() -> None:
    op.execute(
        "CREATE FUNCTION probe_refuse_change_but_gc() RETURNS trigger AS $$ BEGIN "
        "IF TG_OP = 'DELETE' AND EXISTS (SELECT 1 FROM gc_token) THEN RETURN OLD; END IF; "
        # restrict_violation is an integrity error, so the store maps it to Conflict.
        "RAISE EXCEPTION '% rows are immutable', TG_TABLE_NAME "
        "USING ERRCODE = 'restrict_violation'; END $$ LANGUAGE plpgsql"
    )
    for table in _GUARDED:
        op.execute(f"DROP TRIGGER {table}_immutable ON {table}")
        op.execute(
            f"CREATE TRIGGER {table}_immutable BEFORE UPDATE OR DELETE ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION probe_refuse_change_but_gc()"
        )
    op.execute(
        "CREATE TRIGGER gc_tombstones_immutable BEFORE UPDATE OR DELETE ON gc_tombstones "
        "FOR EACH ROW EXECUTE FUNCTION claims_append_only()"
    )
    op.execute(
        "CREATE TRIGGER gc_tombstones_no_truncate BEFORE TRUNCATE ON gc_tombstones "
        "FOR EACH STATEMENT EXECUTE FUNCTION claims_append_only()"
    )


def _sqlite_triggers() -> None:
    for table in _GUARDED:
        op.execute(f"DROP TRIGGER {table}_no_delete")
        op.execute(
            f"CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table} "  # noqa: S608
            "WHEN NOT EXISTS (SELECT 1 FROM gc_token) "
            f"BEGIN SELECT RAISE(ABORT, '{table} rows are immutable'); END"
        )
    for action in ("UPDATE", "DELETE"):
        op.execute(
            f"CREATE TRIGGER gc_tombstones_no_{action.lower()} BEFORE {action} ON "
            "gc_tombstones BEGIN SELECT RAISE(ABORT, 'gc_tombstones rows are immutable'); END"
        )


def downgrade() -> None:
    if op.get_context().dialect.name == "postgresql":
        for table in _GUARDED:
            op.execute(f"DROP TRIGGER {table}_immutable ON {table}")
            op.execute(
                f"CREATE TRIGGER {table}_immutable BEFORE UPDATE OR DELETE ON {table} "
                "FOR EACH ROW EXECUTE FUNCTION probe_refuse_change()"
            )
        op.execute("DROP FUNCTION probe_refuse_change_but_gc()")
    else:
        for table in _GUARDED:
            op.execute(f"DROP TRIGGER {table}_no_delete")
            op.execute(
                f"CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table} "
                f"BEGIN SELECT RAISE(ABORT, '{table} rows are immutable'); END"
            )
    with op.batch_alter_table("blobs") as batch:
        batch.drop_column("touched_ms")
    op.drop_table("gc_lock")
    op.drop_table("gc_token")
    op.drop_table("gc_tombstones")
