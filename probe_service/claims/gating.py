"""``gate``: check every live claim of a scope against a snapshot; pass only with no open
obligation on that snapshot in that scope.

The gate answers for one snapshot (docs/ARCHITECTURE.md, "Claims: the gate"): it opens
obligations only on that snapshot, counts only obligations whose target is that snapshot,
and closes (``current_again``) an obligation on it whose claim is now current. Accepted
risk on that snapshot is listed apart, never as checked.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Connection, select

from ..store import Store
from .checking import evaluate_claims, record_checks
from .obligations import list_in, open_obligations
from .records import GateResult
from .resolutions import close_current_again
from .rows import chunks, load_baselines, load_heads
from .sources import SnapshotSource
from .tables import claim_evidence, claim_supersessions, claim_tombstones, claims

__all__ = ["gate"]


def gate(
    store: Store,
    snapshot_id: str,
    *,
    scope: str | None = None,
    interface: str = "python",
    source: SnapshotSource | None = None,
    require_signed: Callable[[str], str | None] | None = None,
) -> GateResult:
    """Recheck every live claim (in ``scope``, or the whole store) at ``snapshot_id``, open
    an obligation (idempotently) on it for each one not ``current``, close those now current,
    and pass only when no obligation on ``snapshot_id`` in scope is open. A missing snapshot
    makes every claim ``unknown``. Raises StoreUnavailable when the store fails.

    With ``require_signed`` (receipt id -> why it is not acceptably signed, or None) every
    receipt a live claim in scope rests on, and every ``rechecked`` resolution's receipt on
    this snapshot, must be signed by an accepted key; each refused one is named in
    ``unsigned_evidence`` and fails the gate (docs/ARCHITECTURE.md, "Signed receipts").
    """
    with store.reading() as conn:
        ids = live_claim_ids(conn, scope)
        heads = load_heads(conn, ids)
        baselines = load_baselines(conn, ids)
        evidence = _receipt_evidence(conn, ids) if require_signed is not None else []
    checks = evaluate_claims(heads, baselines, snapshot_id, source or SnapshotSource(store))
    with store.transaction() as conn:
        opened = open_obligations(conn, checks, None, interface)
        # an obligation_opened event already carries the claim's applicability
        record_checks(conn, checks, interface, announced={o.claim_id for o in opened})
        closed = close_current_again(conn, checks, interface)
        still_open = list_in(conn, scope=scope, snapshot_id=snapshot_id, state="open")
        risk = list_in(conn, scope=scope, snapshot_id=snapshot_id, resolution="accepted_risk")
        rechecked = list_in(conn, scope=scope, snapshot_id=snapshot_id, resolution="rechecked")
    refused: list[str] = []
    if require_signed is not None:
        uses = [(f"claim {claim_id}", receipt) for claim_id, receipt in evidence]
        uses += [(f"obligation {o.obligation_id}", o.receipt) for o in rechecked if o.receipt]
        for who, receipt in uses:
            why = require_signed(receipt)
            if why is not None:
                refused.append(f"{who}: receipt {receipt}: {why}")
    return GateResult(
        snapshot_id=snapshot_id,
        scope=scope,
        checked=len(checks),
        opened=tuple(opened),
        open_obligations=tuple(still_open),
        passed=not still_open and not refused,
        accepted_risk=tuple(risk),
        current_again=tuple(closed),
        whole_store=scope is None,
        unsigned_evidence=tuple(refused),
    )


def live_claim_ids(conn: Connection, scope: str | None) -> list[str]:
    """Ids of the claims neither superseded nor withdrawn (in ``scope``), in id order."""
    live = (
        select(claims.c.claim_id)
        .where(claims.c.claim_id.not_in(select(claim_supersessions.c.predecessor_id)))
        .where(claims.c.claim_id.not_in(select(claim_tombstones.c.claim_id)))
    )
    if scope is not None:
        live = live.where(claims.c.scope == scope)
    return [row[0] for row in conn.execute(live.order_by(claims.c.claim_id))]


def _receipt_evidence(conn: Connection, claim_ids: list[str]) -> list[tuple[str, str]]:
    """(claim id, receipt) of every receipt evidence of ``claim_ids``, in a stable order."""
    ev = claim_evidence.c
    found: list[tuple[str, str]] = []
    for part in chunks(claim_ids):
        rows = conn.execute(
            select(ev.claim_id, ev.receipt)
            .where(ev.claim_id.in_(part), ev.receipt.is_not(None))
            .order_by(ev.claim_id, ev.position)
        )
        found.extend((row.claim_id, row.receipt) for row in rows)
    return found
