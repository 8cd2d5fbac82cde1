"""The ``runs`` table: the source of truth for queued work (the queue carries only ids);
refutations waiting for their confirmation, and the workers that may confirm them."""

from __future__ import annotations

from sqlalchemy import BigInteger, Boolean, Column, Index, Integer, String, Table, Text, true

from ..store.schema import metadata

__all__ = ["DEFAULT_NAMESPACE", "pending_confirmations", "runs", "worker_heartbeats"]

#: The queue namespace when ``PROBE_REDIS_NAMESPACE`` is unset, and that of rows written
#: before 0007_run_namespace.
DEFAULT_NAMESPACE = "byte-probe"

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
    # added by 0007_run_namespace: the queue namespace the run was submitted to; only
    # workers and janitors of that namespace send or execute it
    Column("namespace", String(128), nullable=False, server_default=DEFAULT_NAMESPACE),
    Index("ix_runs_state_lease", "state", "lease_expires_ms"),
    Index("ix_runs_batch", "batch_id", "seq"),
    Index("ix_runs_namespace_state", "namespace", "state"),
)

#: A run whose first execution refuted and waits, queued again, for its confirmation on
#: another worker (docs/ARCHITECTURE.md, "Confirming a refutation"; migration
#: ``0009_refute_confirmation``). Written with the run's return to the queue, deleted in
#: the transaction that finishes the run.
pending_confirmations = Table(
    "pending_confirmations",
    metadata,
    Column("run_id", String(64), primary_key=True),
    #: The worker (``host:pid``) whose execution refuted first.
    Column("first_worker", String(255), nullable=False),
    #: That execution's receipt fields (``plans.confirm.ReceiptDraft``), unsigned.
    Column("draft", Text, nullable=False),
    Column("created_ms", BigInteger, nullable=False),
)

#: Workers that can run probes, each noting itself every janitor tick, once per queue it
#: consumes (migration ``0009_refute_confirmation``): who else is alive to confirm a
#: refutation sent back to a queue.
worker_heartbeats = Table(
    "worker_heartbeats",
    metadata,
    Column("owner", String(255), primary_key=True),
    Column("queue", String(128), primary_key=True),
    Column("namespace", String(128), nullable=False),
    Column("seen_ms", BigInteger, nullable=False),
)
