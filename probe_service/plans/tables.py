"""Tables of plans and receipts; both are insert-only (database triggers refuse changes)."""

from __future__ import annotations

from sqlalchemy import Boolean, Column, Index, String, Table, Text

from ..store.schema import metadata

__all__ = ["plans", "receipt_signatures", "receipts"]

plans = Table(
    "plans",
    metadata,
    Column("plan_id", String(64), primary_key=True),
    Column("body", Text, nullable=False),
    Column("created_at", String(32), nullable=False),
)

receipts = Table(
    "receipts",
    metadata,
    # Keyed by run: two runs may commit to identical content (the same refusal twice),
    # and each run still has exactly one receipt row.
    Column("run_id", String(64), primary_key=True),
    Column("receipt_sha256", String(64), nullable=False),
    Column("plan_id", String(64), nullable=False),
    Column("action_key", String(64), nullable=False),
    Column("outcome", String(16), nullable=False),
    Column("reason", String(64), nullable=False),
    Column("reusable", Boolean, nullable=False),
    Column("body", Text, nullable=False),
    Column("created_at", String(32), nullable=False),
    Index("ix_receipts_action_key", "action_key"),
    Index("ix_receipts_plan_id", "plan_id"),
    Index("ix_receipts_sha256", "receipt_sha256"),
)

#: DSSE envelopes of signed receipts (docs/ARCHITECTURE.md, "Signed receipts"), one per
#: receipt row, written in the receipt's transaction; insert-only like the receipts.
receipt_signatures = Table(
    "receipt_signatures",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("receipt_sha256", String(64), nullable=False, index=True),
    Column("keyid", String(64), nullable=False),
    Column("envelope", Text, nullable=False),
    Column("created_at", String(32), nullable=False),
)
