"""The ``runs`` table: the source of truth for queued work (the queue carries only ids)."""

from __future__ import annotations

from sqlalchemy import BigInteger, Boolean, Column, Index, Integer, String, Table, true

from ..store.schema import metadata

__all__ = ["runs"]

runs = Table(
    "runs",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("batch_id", String(64), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("plan_id", String(64), nullable=False),
    Column("policy_id", String(128), nullable=False),
    Column("state", String(16), nullable=False),
    Column("attempts", Integer, nullable=False, default=0),
    Column("lease_owner", String(255)),
    Column("lease_expires_ms", BigInteger),
    Column("enqueued_ms", BigInteger),
    Column("action_key", String(64)),
    Column("receipt_sha256", String(64)),
    Column("outcome", String(16)),
    Column("reason", String(64)),
    Column("submitted_ms", BigInteger, nullable=False),
    Column("finished_ms", BigInteger),
    # added by 0005_trust: the submitter's reuse choice, and whether a receipt was reused
    Column("reuse", Boolean, nullable=False, server_default=true()),
    Column("reused", Boolean, nullable=True),
    Index("ix_runs_state_lease", "state", "lease_expires_ms"),
    Index("ix_runs_batch", "batch_id", "seq"),
)
