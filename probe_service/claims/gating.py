"""``gate``: check every live claim of a scope against a snapshot; pass only with no open
obligation on that snapshot in that scope.

The gate answers for one snapshot (docs/ARCHITECTURE.md, "Claims: the gate"): it opens
obligations only on that snapshot, counts only obligations whose target is that snapshot,
and closes (``current_again``) an obligation on it whose claim is now current. Accepted
risk on that snapshot is listed apart, never as checked. It refuses what it cannot judge:
a snapshot the store does not hold, and a scope without a live claim (``scopes.py``).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Connection, select

from ..store import Store
from .callers import PYTHON_CALLER, Caller, snapshots_for
from .checking import evaluate_claims, record_checks
from .obligations import list_in, open_obligations
from .records import GateResult
from .resolutions import close_current_again
from .rows import chunks, load_baselines, load_heads
from .scopes import require_live_claims
from .sources import SnapshotSource
from .tables import claim_evidence

__all__ = ["gate"]


def gate(
    store: Store,
    snapshot_id: str,
    *,
    scope: str | None = None,
    caller: Caller = PYTHON_CALLER,
    source: SnapshotSource | None = None,
    require_signed: Callable[[str], str | None] | None = None,
    allow_empty: bool = False,
) -> GateResult:
    """Recheck every live claim (in ``scope``, or the whole store) at ``snapshot_id``, open
    an obligation (idempotently) on it for each one not ``current``, close those now current,
    and pass only when no obligation on ``snapshot_id`` in scope is open.

    The gate refuses what it cannot judge, before writing anything: NotFound when the store
    does not hold ``snapshot_id``; InvalidInput naming the scope and listing those that
    exist when the scope (or the store) holds no live claim, unless ``allow_empty``.
    Raises StoreUnavailable when the store fails.

    With ``require_signed`` (receipt id -> why it is not acceptably signed, or None) every
    receipt a live claim in scope rests on, and every ``rechecked`` resolution's receipt on
    this snapshot, must be signed by an accepted key; each refused one is named in
    ``unsigned_evidence`` and fails the gate (docs/ARCHITECTURE.md, "Signed receipts").
    """
    source = source or snapshots_for(store, caller)
    source.require(snapshot_id, "snapshot_id")
    with store.reading() as conn:
        ids = require_live_claims(conn, scope, allow_empty=allow_empty)
        heads = load_heads(conn, ids)
        baselines = load_baselines(conn, ids)
        evidence = _receipt_evidence(conn, ids) if require_signed is not None else []
    checks = evaluate_claims(heads, baselines, snapshot_id, source)
    with store.transaction() as conn:
        opened = open_obligations(conn, checks, None, caller.face)
        # an obligation_opened event already carries the claim's applicability
        record_checks(conn, checks, caller.face, announced={o.claim_id for o in opened})
        closed = close_current_again(conn, checks, caller.face)
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
