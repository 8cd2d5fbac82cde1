"""The floors of retention: what ``gc`` keeps whatever its age (docs/ARCHITECTURE.md,
"Retention and gc").

``floor_roots`` is the one function listing roots; each source adds what one part of the
store holds on to. A new part that must hold objects adds its source to
``ROOT_SOURCES``, as the review queue did (a pending review keeps what it asks about);
nothing else in gc changes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy import Connection, text

from ..snapshot.gitcache import decode_blob_pack
from ..snapshot.statcache import decode_pack

__all__ = ["ROOT_SOURCES", "Roots", "floor_roots"]


@dataclass
class Roots:
    """Ids kept whatever their age; each set names one kind."""

    receipt_shas: set[str] = field(default_factory=set)
    runs: set[str] = field(default_factory=set)
    plans: set[str] = field(default_factory=set)
    snapshots: set[str] = field(default_factory=set)
    blobs: set[str] = field(default_factory=set)


def _ids(conn: Connection, sql: str) -> set[str]:
    return {str(v) for v in conn.execute(text(sql)).scalars() if v is not None}


_LIVE = "claim_id NOT IN (SELECT claim_id FROM claim_tombstones)"
_OPEN = "obligation_id NOT IN (SELECT obligation_id FROM obligation_resolutions)"


def live_claim_roots(conn: Connection, roots: Roots) -> None:
    """A claim not withdrawn keeps its receipts, declared plans and snapshot. Superseded
    claims stay live here: a supersession chain is kept with what evidences each link."""
    roots.receipt_shas |= _ids(conn, f"SELECT receipt FROM claim_evidence WHERE {_LIVE}")  # noqa: S608
    roots.plans |= _ids(conn, f"SELECT plan_id FROM claim_evidence WHERE {_LIVE}")  # noqa: S608
    roots.snapshots |= _ids(conn, f"SELECT snapshot_id FROM claims WHERE {_LIVE}")  # noqa: S608


def open_obligation_roots(conn: Connection, roots: Roots) -> None:
    """An open obligation keeps both its snapshots, its claim's evidence (even a withdrawn
    claim's), and the plans and runs of a recheck working on it."""
    for column in ("snapshot_id", "from_snapshot_id"):
        roots.snapshots |= _ids(conn, f"SELECT {column} FROM obligations WHERE {_OPEN}")  # noqa: S608
    claims = f"claim_id IN (SELECT claim_id FROM obligations WHERE {_OPEN})"  # noqa: S608
    roots.receipt_shas |= _ids(conn, f"SELECT receipt FROM claim_evidence WHERE {claims}")  # noqa: S608
    roots.plans |= _ids(conn, f"SELECT plan_id FROM claim_evidence WHERE {claims}")  # noqa: S608
    roots.plans |= _ids(conn, f"SELECT plan_id FROM recheck_items WHERE {_OPEN}")  # noqa: S608
    roots.runs |= _ids(conn, f"SELECT run_id FROM recheck_items WHERE {_OPEN}")  # noqa: S608
    roots.snapshots |= _ids(
        conn,
        "SELECT snapshot_id FROM rechecks WHERE batch_id NOT IN "
        "(SELECT batch_id FROM recheck_settlements)",
    )


def pending_review_roots(conn: Connection, roots: Roots) -> None:
    """A pending review (a request without its decision) keeps its obligation's
    snapshots and its claim's evidence, even once the obligation is no longer open."""
    pending = (
        "obligation_id IN (SELECT obligation_id FROM review_requests WHERE review_id NOT IN "
        "(SELECT review_id FROM review_decisions))"
    )
    for column in ("snapshot_id", "from_snapshot_id"):
        roots.snapshots |= _ids(conn, f"SELECT {column} FROM obligations WHERE {pending}")  # noqa: S608
    claims = f"claim_id IN (SELECT claim_id FROM obligations WHERE {pending})"  # noqa: S608
    roots.receipt_shas |= _ids(conn, f"SELECT receipt FROM claim_evidence WHERE {claims}")  # noqa: S608
    roots.plans |= _ids(conn, f"SELECT plan_id FROM claim_evidence WHERE {claims}")  # noqa: S608


def turn_roots(conn: Connection, roots: Roots) -> None:
    """Agent turns are never removed, so the snapshots they name stay readable."""
    roots.snapshots |= _ids(conn, "SELECT snapshot_id FROM turns")
    roots.snapshots |= _ids(conn, "SELECT end_snapshot_id FROM turn_answers")
    roots.snapshots |= _ids(conn, "SELECT snapshot_id FROM turn_blocks")


def queue_roots(conn: Connection, roots: Roots) -> None:
    """A run waiting for its refutation's confirmation is not finished, whatever its row
    says."""
    roots.runs |= _ids(conn, "SELECT run_id FROM pending_confirmations")


def cache_roots(conn: Connection, roots: Roots) -> None:
    """A capture trusts its stat cache and git blob cache to name stored blobs without
    reading the files again, so every digest they hold stays."""
    for key, data in conn.execute(text("SELECT root, entries FROM stat_packs")):
        if str(key).startswith("git:blobs:"):
            roots.blobs |= {sha for sha, _size in decode_blob_pack(bytes(data)).values()}
        elif not str(key).startswith("git:"):
            roots.blobs |= {digest for _stat, digest in decode_pack(bytes(data)).values()}


ROOT_SOURCES: tuple[Callable[[Connection, Roots], None], ...] = (
    live_claim_roots,
    open_obligation_roots,
    pending_review_roots,
    turn_roots,
    queue_roots,
    cache_roots,
)


def floor_roots(conn: Connection) -> Roots:
    """Every id the floors keep, from every source in ROOT_SOURCES."""
    roots = Roots()
    for source in ROOT_SOURCES:
        source(conn, roots)
    return roots
