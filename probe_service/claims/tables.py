"""SQLAlchemy Core tables of the claims part, on the store's shared ``metadata``.

Rows here are never updated: a claim's outcome is fixed at creation, applicability lives in
``claim_checks``, withdrawal in ``claim_tombstones``, supersession in ``claim_supersessions``
and an obligation is resolved by adding its ``obligation_resolutions`` row. The migration
``0004_claims`` creates these tables, the full-text index and the append-only triggers.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from ..store.schema import metadata

__all__ = [
    "claim_audit",
    "claim_checks",
    "claim_dep_domains",
    "claim_dep_paths",
    "claim_dependencies",
    "claim_evidence",
    "claim_supersessions",
    "claim_tombstones",
    "claims",
    "obligation_resolutions",
    "obligations",
    "recheck_items",
    "recheck_settlements",
    "rechecks",
    "review_decisions",
    "review_requests",
]

_ID = 40
_SHA = 64
_TIME = 32
#: SQLite only autoincrements a column typed exactly INTEGER.
_SERIAL = BigInteger().with_variant(Integer(), "sqlite")


def _claim_fk(name: str = "claim_id", *, primary: bool = False) -> Column[str]:
    return Column(name, String(_ID), ForeignKey("claims.claim_id"), primary_key=primary)


claims = Table(
    "claims",
    metadata,
    Column("claim_id", String(_ID), primary_key=True),
    Column("scope", String(128), nullable=False, index=True),
    Column("origin", String(16), nullable=False),
    Column("kind", String(64), nullable=False),
    Column("statement", Text, nullable=False),
    Column("question", Text, nullable=True),
    Column("outcome", String(16), nullable=False),
    Column("snapshot_id", String(_SHA), nullable=False),
    Column("boundary_key", String(_SHA), nullable=False, index=True),
    Column("record_digest", String(_SHA), nullable=False),
    Column("flagged", String(32), nullable=True),
    Column("created_at", String(_TIME), nullable=False),
)

claim_evidence = Table(
    "claim_evidence",
    metadata,
    _claim_fk(primary=True),
    Column("position", Integer, primary_key=True),
    Column("kind", String(16), nullable=False),
    Column("receipt", String(_SHA), nullable=True),
    Column("receipt_outcome", String(16), nullable=True),
    Column("path", Text, nullable=True, index=True),
    Column("span_start", BigInteger, nullable=True),
    Column("span_end", BigInteger, nullable=True),
    Column("sha256", String(_SHA), nullable=True),
    Column("text", Text, nullable=True),
    # added by 0005_trust: the plan a claim declares as its recheck
    Column("plan_id", String(_SHA), nullable=True),
    # added by 0006_signatures: who signed the receipt (fingerprint or "unsigned")
    Column("receipt_signer", String(_SHA), nullable=True),
)

claim_dependencies = Table(
    "claim_dependencies",
    metadata,
    _claim_fk(primary=True),
    Column("position", Integer, primary_key=True),
    Column("form", String(16), nullable=False),
    Column("baseline", Text, nullable=False),
)

#: Index of exact_blob paths: change analysis looks claims up by changed path.
claim_dep_paths = Table(
    "claim_dep_paths",
    metadata,
    Column("path", Text, primary_key=True),
    _claim_fk(primary=True),
    Column("scope", String(128), nullable=False),
)

#: Index of query domains by their literal directory prefix (text before the first wildcard).
claim_dep_domains = Table(
    "claim_dep_domains",
    metadata,
    Column("prefix", Text, primary_key=True),
    _claim_fk(primary=True),
    Column("glob", Text, primary_key=True),
    Column("scope", String(128), nullable=False),
)

claim_checks = Table(
    "claim_checks",
    metadata,
    Column("check_id", _SERIAL, primary_key=True, autoincrement=True),
    _claim_fk(),
    Column("scope", String(128), nullable=False),
    Column("snapshot_id", String(_SHA), nullable=False),
    Column("state", String(16), nullable=False),
    Column("reasons", Text, nullable=False),
    Column("checked_at", String(_TIME), nullable=False),
    Index("ix_claim_checks_claim", "claim_id", "snapshot_id"),
    sqlite_autoincrement=True,
)

claim_supersessions = Table(
    "claim_supersessions",
    metadata,
    _claim_fk("predecessor_id", primary=True),
    Column("successor_id", String(_ID), ForeignKey("claims.claim_id"), unique=True),
    Column("scope", String(128), nullable=False),
    Column("rationale", Text, nullable=False),
    Column("created_at", String(_TIME), nullable=False),
)

claim_tombstones = Table(
    "claim_tombstones",
    metadata,
    _claim_fk(primary=True),
    Column("scope", String(128), nullable=False),
    Column("boundary_key", String(_SHA), nullable=False, index=True),
    Column("rationale", Text, nullable=False),
    Column("withdrawn_at", String(_TIME), nullable=False),
)

obligations = Table(
    "obligations",
    metadata,
    Column("obligation_id", String(_ID), primary_key=True),
    _claim_fk(),
    Column("scope", String(128), nullable=False, index=True),
    Column("snapshot_id", String(_SHA), nullable=False),
    Column("from_snapshot_id", String(_SHA), nullable=True),
    Column("applicability", String(16), nullable=False),
    Column("reasons", Text, nullable=False),
    Column("opened_at", String(_TIME), nullable=False),
    UniqueConstraint("claim_id", "snapshot_id", name="uq_obligations_claim_snapshot"),
)

obligation_resolutions = Table(
    "obligation_resolutions",
    metadata,
    Column(
        "obligation_id",
        String(_ID),
        ForeignKey("obligations.obligation_id"),
        primary_key=True,
    ),
    Column("resolution", String(16), nullable=False),
    Column("rationale", Text, nullable=False),
    Column("receipt", String(_SHA), nullable=True),
    Column("successor_claim_id", String(_ID), nullable=True),
    Column("resolved_at", String(_TIME), nullable=False),
    # added by 0005_trust: who resolved it, through which interface
    Column("interface", String(32), nullable=True),
    Column("resolved_by", String(128), nullable=True),
    # added by 0006_signatures: who signed a rechecked resolution's receipt
    Column("receipt_signer", String(_SHA), nullable=True),
)

#: Append-only: triggers from the migration refuse UPDATE and DELETE.
claim_audit = Table(
    "claim_audit",
    metadata,
    Column("audit_id", _SERIAL, primary_key=True, autoincrement=True),
    Column("at", String(_TIME), nullable=False),
    Column("operation", String(64), nullable=False),
    Column("interface", String(32), nullable=False),
    Column("scope", String(128), nullable=False),
    Column("subject_ids", Text, nullable=False),
    Column("before_digest", String(_SHA), nullable=True),
    Column("after_digest", String(_SHA), nullable=True),
    # added by 0015_principals: who made the write, from the operating system
    Column("actor", String(200), nullable=True),
    Column("actor_kind", String(16), nullable=True),
    sqlite_autoincrement=True,
)

#: A resolution a clearing rule sends to a second party (docs/ARCHITECTURE.md, "Principals
#: and clearing"); insert-only, pending until its ``review_decisions`` row exists.
review_requests = Table(
    "review_requests",
    metadata,
    Column("review_id", String(_ID), primary_key=True),
    Column(
        "obligation_id",
        String(_ID),
        ForeignKey("obligations.obligation_id"),
        nullable=False,
        index=True,
    ),
    Column("scope", String(128), nullable=False, index=True),
    Column("resolution", String(16), nullable=False),
    Column("rationale", Text, nullable=False),
    Column("successor_claim_id", String(_ID), nullable=True),
    Column("requested_by", String(200), nullable=False),
    Column("requested_kind", String(16), nullable=False),
    Column("interface", String(32), nullable=False),
    Column("requested_at", String(_TIME), nullable=False),
)

#: The one decision on a review request: its primary key makes a second one a conflict.
review_decisions = Table(
    "review_decisions",
    metadata,
    Column("review_id", String(_ID), ForeignKey("review_requests.review_id"), primary_key=True),
    Column("decision", String(16), nullable=False),
    Column("rationale", Text, nullable=False),
    Column("decided_by", String(200), nullable=False),
    Column("interface", String(32), nullable=False),
    Column("decided_at", String(_TIME), nullable=False),
)


#: One ``obligation_recheck`` request that queued reruns (docs/ARCHITECTURE.md, "Recheck"),
#: keyed by the batch its runs belong to (migration ``0011_rechecks``). Insert-only.
rechecks = Table(
    "rechecks",
    metadata,
    Column("batch_id", String(_SHA), primary_key=True),
    Column("snapshot_id", String(_SHA), nullable=False),
    Column("scope", String(128), nullable=True),
    Column("interface", String(32), nullable=False),
    Column("requested_by", String(128), nullable=True),
    Column("requested_at", String(_TIME), nullable=False),
)

#: Each rerun of a recheck: the obligation, the evidence it repeats (a receipt, or a plan
#: the claim declares), the new plan on the target snapshot and the run executing it.
recheck_items = Table(
    "recheck_items",
    metadata,
    Column("batch_id", String(_SHA), ForeignKey("rechecks.batch_id"), primary_key=True),
    Column("position", Integer, primary_key=True),
    Column("obligation_id", String(_ID), nullable=False, index=True),
    Column("claim_id", String(_ID), nullable=False),
    Column("evidence_kind", String(16), nullable=False),
    Column("evidence", String(_SHA), nullable=False),
    Column("plan_id", String(_SHA), nullable=False),
    Column("policy_id", String(128), nullable=False),
    Column("run_id", String(_SHA), nullable=False, index=True),
)

#: A recheck's settlement, written once, in the transaction of the resolutions it made:
#: the primary key is what makes settling exactly-once, whoever settles (the worker that
#: finished the last run, or any poll).
recheck_settlements = Table(
    "recheck_settlements",
    metadata,
    Column("batch_id", String(_SHA), ForeignKey("rechecks.batch_id"), primary_key=True),
    Column("settled_at", String(_TIME), nullable=False),
    Column("settled_by", String(255), nullable=False),
    #: JSON: per obligation, what the settlement found and did.
    Column("verdicts", Text, nullable=False),
)
