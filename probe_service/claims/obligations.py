"""Recheck obligations: opened idempotently, listed by filter, resolved with a rationale.

An obligation is unique per (claim, target snapshot); analysing the same change twice opens
nothing new. Resolution adds an ``obligation_resolutions`` row; nothing is updated.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any, Literal

from sqlalchemy import Connection, Insert, Row, insert, select

from ..errors import Conflict, InvalidClaim, NotFound
from ..store import Store, append_event, insert_on_conflict, utc_now
from .audit import append_audit
from .digests import digest_json
from .lineage import record_supersession, withdraw_in
from .receipts import ReceiptLookup, no_receipts
from .records import ClaimCheck, Obligation
from .rows import load_claim, reasons_json
from .tables import obligation_resolutions, obligations

__all__ = ["RESOLUTIONS", "obligation_list", "obligation_resolve", "open_obligations"]

Resolution = Literal["rechecked", "accepted_risk", "superseded", "withdrawn"]
RESOLUTIONS: tuple[str, ...] = ("rechecked", "accepted_risk", "superseded", "withdrawn")
#: Longest page ``obligation_list`` returns.
MAX_LIST = 10_000


def open_obligations(
    conn: Connection, checks: Sequence[ClaimCheck], from_snapshot: str | None, interface: str
) -> list[Obligation]:
    """Open one obligation per check that is not ``current``; existing ones are kept.

    One batched INSERT ... ON CONFLICT DO NOTHING RETURNING tells exactly which rows are
    new, even against a concurrent writer; each new one gets an event, each scope an audit.
    """
    now = utc_now()
    rows = {
        c.claim_id: {
            "obligation_id": "obl_" + uuid.uuid4().hex,
            "claim_id": c.claim_id,
            "scope": c.scope,
            "snapshot_id": c.snapshot_id,
            "from_snapshot_id": from_snapshot,
            "applicability": c.state,
            "reasons": reasons_json(c.reasons),
            "opened_at": now,
        }
        for c in checks
        if c.state != "current"
    }
    if not rows:
        return []
    inserted = {r[0] for r in conn.execute(_insert_new(conn), list(rows.values()))}
    opened = [_obligation(row, None) for row in rows.values() if row["obligation_id"] in inserted]
    _announce_opened(conn, opened, interface)
    return opened


def _announce_opened(conn: Connection, opened: Sequence[Obligation], interface: str) -> None:
    for obligation in opened:
        append_event(
            conn,
            "obligation_opened",
            obligation.obligation_id,
            {
                "scope": obligation.scope,
                "claim_id": obligation.claim_id,
                "snapshot_id": obligation.snapshot_id,
                "applicability": obligation.applicability,
            },
        )
    for scope in sorted({o.scope for o in opened}):
        group = [o for o in opened if o.scope == scope]
        append_audit(
            conn,
            operation="obligation_open",
            interface=interface,
            scope=scope,
            subject_ids=[o.obligation_id for o in group],
            before=None,
            after=digest_json([o.model_dump(mode="json") for o in group]),
        )


def _insert_new(conn: Connection) -> Insert:
    """INSERT that skips an existing (claim, snapshot) pair instead of failing the
    transaction (PostgreSQL aborts a transaction on a unique violation)."""
    stmt = insert_on_conflict(conn, obligations).on_conflict_do_nothing(
        index_elements=["claim_id", "snapshot_id"]
    )
    return stmt.returning(obligations.c.obligation_id)


def obligation_list(
    store: Store,
    *,
    scope: str | None = None,
    state: Literal["open", "resolved"] | None = None,
    claim_id: str | None = None,
    snapshot_id: str | None = None,
    limit: int = 1000,
) -> list[Obligation]:
    """Obligations matching every given filter, oldest first (at most ``limit``)."""
    if not 1 <= limit <= MAX_LIST:
        raise InvalidClaim(f"limit: {limit} is outside 1..{MAX_LIST}")
    with store.reading() as conn:
        return list_in(
            conn, scope=scope, state=state, claim_id=claim_id, snapshot_id=snapshot_id, limit=limit
        )


def list_in(
    conn: Connection,
    *,
    scope: str | None = None,
    state: str | None = None,
    claim_id: str | None = None,
    snapshot_id: str | None = None,
    limit: int = MAX_LIST,
    obligation_id: str | None = None,
) -> list[Obligation]:
    """``obligation_list`` inside the caller's transaction."""
    o, r = obligations.c, obligation_resolutions.c
    query = select(
        obligations, r.resolution, r.rationale, r.receipt, r.successor_claim_id, r.resolved_at
    ).join(obligation_resolutions, o.obligation_id == r.obligation_id, isouter=True)
    filters: list[Any] = [
        o.scope == scope if scope is not None else None,
        o.claim_id == claim_id if claim_id is not None else None,
        o.snapshot_id == snapshot_id if snapshot_id is not None else None,
        o.obligation_id == obligation_id if obligation_id is not None else None,
        {"open": r.resolution.is_(None), "resolved": r.resolution.is_not(None)}.get(state or ""),
    ]
    for condition in filters:
        if condition is not None:
            query = query.where(condition)
    rows = conn.execute(query.order_by(o.opened_at, o.obligation_id).limit(limit))
    return [_obligation(row._mapping, row) for row in rows]


def _obligation(head: Any, row: Row[Any] | None) -> Obligation:
    resolved = row is not None and row.resolution is not None
    return Obligation(
        obligation_id=head["obligation_id"],
        claim_id=head["claim_id"],
        scope=head["scope"],
        snapshot_id=head["snapshot_id"],
        from_snapshot_id=head["from_snapshot_id"],
        state="resolved" if resolved else "open",
        applicability=head["applicability"],
        reasons=tuple(json.loads(head["reasons"])),
        opened_at=head["opened_at"],
        resolution=row.resolution if resolved and row else None,
        rationale=row.rationale if resolved and row else None,
        receipt=row.receipt if resolved and row else None,
        successor_claim_id=row.successor_claim_id if resolved and row else None,
        resolved_at=row.resolved_at if resolved and row else None,
    )


def obligation_resolve(
    store: Store,
    obligation_id: str,
    resolution: str,
    rationale: str,
    *,
    receipt: str | None = None,
    successor_claim_id: str | None = None,
    receipts: ReceiptLookup = no_receipts,
    scope: str | None = None,
    interface: str = "python",
) -> Obligation:
    """Resolve an open obligation; the rationale is required and kept.

    ``rechecked`` names a receipt the lookup knows; ``superseded`` names the successor claim
    (linked now if it is not yet); ``withdrawn`` withdraws the claim (tombstone).
    Raises InvalidClaim (bad resolution, missing rationale/receipt/successor), NotFound,
    Conflict (already resolved).
    """
    _check_resolution(resolution, rationale, receipt, successor_claim_id, receipts)
    with store.transaction() as conn:
        found = list_in(conn, obligation_id=obligation_id, scope=scope)
        if not found:
            raise NotFound(f"obligation_id: no obligation {obligation_id!r}")
        before = found[0]
        if before.state == "resolved":
            raise Conflict(f"obligation {obligation_id} is already resolved ({before.resolution})")
        _apply_side_effect(conn, before, resolution, rationale, successor_claim_id, interface)
        conn.execute(
            insert(obligation_resolutions).values(
                obligation_id=obligation_id,
                resolution=resolution,
                rationale=rationale,
                receipt=receipt,
                successor_claim_id=successor_claim_id,
                resolved_at=utc_now(),
            )
        )
        after = list_in(conn, obligation_id=obligation_id)[0]
        _announce_resolution(conn, before, after, interface)
    return after


def _announce_resolution(
    conn: Connection, before: Obligation, after: Obligation, interface: str
) -> None:
    append_audit(
        conn,
        operation="obligation_resolve",
        interface=interface,
        scope=after.scope,
        subject_ids=[after.obligation_id, after.claim_id],
        before=digest_json(before.model_dump(mode="json")),
        after=digest_json(after.model_dump(mode="json")),
    )
    append_event(
        conn,
        "obligation_resolved",
        after.obligation_id,
        {"scope": after.scope, "claim_id": after.claim_id, "resolution": after.resolution},
    )


def _check_resolution(
    resolution: str,
    rationale: str,
    receipt: str | None,
    successor: str | None,
    receipts: ReceiptLookup,
) -> None:
    if resolution not in RESOLUTIONS:
        raise InvalidClaim(f"resolution: {resolution!r} is not one of {', '.join(RESOLUTIONS)}")
    if not rationale or not rationale.strip():
        raise InvalidClaim("rationale: required")
    if resolution == "rechecked":
        if not receipt:
            raise InvalidClaim("receipt: a 'rechecked' resolution names the new receipt")
        if receipts(receipt) is None:
            raise InvalidClaim(f"receipt: unknown receipt {receipt!r}")
    elif receipt is not None:
        raise InvalidClaim("receipt: only a 'rechecked' resolution names a receipt")
    if (resolution == "superseded") != (successor is not None):
        raise InvalidClaim("successor_claim_id: named by, and only by, a 'superseded' resolution")


def _apply_side_effect(
    conn: Connection,
    obligation: Obligation,
    resolution: str,
    rationale: str,
    successor: str | None,
    interface: str,
) -> None:
    if resolution == "superseded" and successor is not None:
        claim = load_claim(conn, obligation.claim_id)
        if claim.superseded_by != successor:
            record_supersession(
                conn,
                obligation.claim_id,
                successor,
                obligation.scope,
                rationale,
                interface=interface,
            )
    elif resolution == "withdrawn" and not load_claim(conn, obligation.claim_id).withdrawn:
        withdraw_in(
            conn, obligation.claim_id, rationale, scope=obligation.scope, interface=interface
        )
