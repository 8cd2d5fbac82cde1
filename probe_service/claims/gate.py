"""``gate``: check every live claim of a scope against a snapshot; pass only with no open
obligation on that snapshot in that scope.

The gate answers for one snapshot (docs/ARCHITECTURE.md, "Claims: the gate"): it opens
obligations only on that snapshot, counts only obligations whose target is that snapshot,
and closes (``current_again``) an obligation on it whose claim is now current. Accepted
risk on that snapshot is listed apart, never as checked.
"""

from __future__ import annotations

from sqlalchemy import select

from ..store import Store
from .checking import evaluate_claims, record_checks
from .obligations import list_in, open_obligations
from .records import GateResult
from .resolutions import close_current_again
from .rows import load_baselines, load_heads
from .sources import SnapshotSource
from .tables import claim_supersessions, claim_tombstones, claims

__all__ = ["gate"]


def gate(
    store: Store,
    snapshot_id: str,
    *,
    scope: str | None = None,
    interface: str = "python",
    source: SnapshotSource | None = None,
) -> GateResult:
    """Recheck every live claim (in ``scope``, or the whole store) at ``snapshot_id``, open
    an obligation (idempotently) on it for each one not ``current``, close those now current,
    and pass only when no obligation on ``snapshot_id`` in scope is open. A missing snapshot
    makes every claim ``unknown``. Raises StoreUnavailable when the store fails.
    """
    live = (
        select(claims.c.claim_id)
        .where(claims.c.claim_id.not_in(select(claim_supersessions.c.predecessor_id)))
        .where(claims.c.claim_id.not_in(select(claim_tombstones.c.claim_id)))
    )
    if scope is not None:
        live = live.where(claims.c.scope == scope)
    with store.reading() as conn:
        ids = [row[0] for row in conn.execute(live.order_by(claims.c.claim_id))]
        heads = load_heads(conn, ids)
        baselines = load_baselines(conn, ids)
    checks = evaluate_claims(heads, baselines, snapshot_id, source or SnapshotSource(store))
    with store.transaction() as conn:
        opened = open_obligations(conn, checks, None, interface)
        # an obligation_opened event already carries the claim's applicability
        record_checks(conn, checks, interface, announced={o.claim_id for o in opened})
        closed = close_current_again(conn, checks, interface)
        still_open = list_in(conn, scope=scope, snapshot_id=snapshot_id, state="open")
        risk = list_in(conn, scope=scope, snapshot_id=snapshot_id, resolution="accepted_risk")
    return GateResult(
        snapshot_id=snapshot_id,
        scope=scope,
        checked=len(checks),
        opened=tuple(opened),
        open_obligations=tuple(still_open),
        passed=not still_open,
        accepted_risk=tuple(risk),
        current_again=tuple(closed),
        whole_store=scope is None,
    )
