"""Reading obligations and appending their resolutions (the low level both
``obligations`` and ``lineage`` write through).

A resolution is one ``obligation_resolutions`` row, never updated: it keeps the resolution,
the rationale, the interface and actor that resolved it, and (for ``rechecked``) the
receipt. Resolutions the service records by itself (``current_again`` when a check shows
every dependency current again, ``withdrawn`` when the claim is withdrawn) go through the
same path, so history is appended, never rewritten.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Row, insert, select

from ..store import append_event, utc_now
from .audit import append_audit
from .digests import digest_json
from .records import ClaimCheck, Obligation
from .tables import obligation_resolutions, obligations

__all__ = ["MAX_LIST", "close_current_again", "list_in", "obligation_from_row", "resolve_in"]

#: Longest page ``obligation_list`` returns.
MAX_LIST = 10_000


def list_in(
    conn: Connection,
    *,
    scope: str | None = None,
    state: str | None = None,
    claim_id: str | None = None,
    snapshot_id: str | None = None,
    limit: int = MAX_LIST,
    obligation_id: str | None = None,
    resolution: str | None = None,
) -> list[Obligation]:
    """Obligations matching every given filter, oldest first, inside the caller's
    transaction."""
    o, r = obligations.c, obligation_resolutions.c
    query = select(
        obligations,
        r.resolution,
        r.rationale,
        r.receipt,
        r.receipt_signer,
        r.successor_claim_id,
        r.resolved_at,
        r.interface,
        r.resolved_by,
    ).join(obligation_resolutions, o.obligation_id == r.obligation_id, isouter=True)
    filters: list[Any] = [
        o.scope == scope if scope is not None else None,
        o.claim_id == claim_id if claim_id is not None else None,
        o.snapshot_id == snapshot_id if snapshot_id is not None else None,
        o.obligation_id == obligation_id if obligation_id is not None else None,
        r.resolution == resolution if resolution is not None else None,
        {"open": r.resolution.is_(None), "resolved": r.resolution.is_not(None)}.get(state or ""),
    ]
    for condition in filters:
        if condition is not None:
            query = query.where(condition)
    rows = conn.execute(query.order_by(o.opened_at, o.obligation_id).limit(limit))
    return [obligation_from_row(row._mapping, row) for row in rows]


def obligation_from_row(head: Any, row: Row[Any] | None) -> Obligation:
    """An ``Obligation`` from its head columns and (if resolved) its resolution row."""
    resolved = row is not None and row.resolution is not None
    extra: dict[str, Any] = {}
    if resolved and row is not None:
        extra = {
            key: getattr(row, key)
            for key in (
                "resolution",
                "rationale",
                "receipt",
                "receipt_signer",
                "successor_claim_id",
                "resolved_at",
                "interface",
                "resolved_by",
            )
        }
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
        **extra,
    )


def resolve_in(
    conn: Connection,
    open_rows: Sequence[Obligation],
    resolution: str,
    rationale: str,
    *,
    interface: str,
    resolved_by: str | None = None,
    receipt: str | None = None,
    successor_claim_id: str | None = None,
    receipt_signer: str | None = None,
) -> list[Obligation]:
    """Append a resolution for each of ``open_rows`` with its audit entry and event."""
    done: list[Obligation] = []
    for before in open_rows:
        conn.execute(
            insert(obligation_resolutions).values(
                obligation_id=before.obligation_id,
                resolution=resolution,
                rationale=rationale,
                receipt=receipt,
                receipt_signer=receipt_signer,
                successor_claim_id=successor_claim_id,
                resolved_at=utc_now(),
                interface=interface,
                resolved_by=resolved_by,
            )
        )
        after = list_in(conn, obligation_id=before.obligation_id)[0]
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
        done.append(after)
    return done


def close_current_again(
    conn: Connection, checks: Sequence[ClaimCheck], interface: str
) -> list[Obligation]:
    """Resolve as ``current_again`` every open obligation whose claim a check just found
    ``current`` on the obligation's own snapshot."""
    current: dict[str, set[str]] = {}
    for check in checks:
        if check.state == "current":
            current.setdefault(check.snapshot_id, set()).add(check.claim_id)
    closed: list[Obligation] = []
    for snapshot_id, claim_ids in sorted(current.items()):
        still = [
            o
            for o in list_in(conn, snapshot_id=snapshot_id, state="open")
            if o.claim_id in claim_ids
        ]
        closed += resolve_in(
            conn,
            still,
            "current_again",
            f"every dependency is current on {snapshot_id} again",
            interface=interface,
            resolved_by="byte-probe",
        )
    return closed
