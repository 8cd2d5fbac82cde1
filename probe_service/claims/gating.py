"""``gate``: check every live claim of a scope against a snapshot; pass only with no open
obligation on that snapshot in that scope.

The gate answers for one snapshot (docs/ARCHITECTURE.md, "Claims: the gate"): it opens
obligations only on that snapshot, counts only obligations whose target is that snapshot,
and closes (``current_again``) an obligation on it whose claim is now current. Accepted
risk on that snapshot is listed apart, never as checked. It refuses what it cannot judge:
a snapshot the store does not hold, and a scope without a live claim (``scopes.py``).
Its answer is a ``GateReport`` (``gate_report``): each open obligation with its claim's
statement, what moved and the next command, and the live claims that are refuted.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Connection, select

from ..store import Store
from .callers import PYTHON_CALLER, Caller, snapshots_for
from .checking import evaluate_claims, record_checks
from .gate_report import GateReport, gate_entries, refuted_claims
from .next_steps import recheck_command
from .obligations import list_in, open_obligations
from .records import ClaimCheck, Obligation
from .resolutions import close_current_again
from .rows import chunks, load_baselines, load_claims, load_heads
from .scopes import require_live_claims
from .sources import SnapshotSource
from .tables import claim_evidence

__all__ = ["check_live_claims", "gate"]


def gate(
    store: Store,
    snapshot_id: str,
    *,
    scope: str | None = None,
    caller: Caller = PYTHON_CALLER,
    source: SnapshotSource | None = None,
    require_signed: Callable[[str], str | None] | None = None,
    allow_empty: bool = False,
    fail_on_refuted: bool = False,
) -> GateReport:
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

    Live claims whose outcome is refuted are listed in ``refuted``: a warning, and a
    failure with ``fail_on_refuted`` (docs/ARCHITECTURE.md, "The gate report").
    """
    source = source or snapshots_for(store, caller)
    checks, opened, closed = check_live_claims(
        store, snapshot_id, scope, interface=caller.face, source=source, allow_empty=allow_empty
    )
    # Held here: the checks memoized their results on this tree, and what moved reads them.
    target = source.tree(snapshot_id)
    with store.reading() as conn:
        still_open = list_in(conn, scope=scope, snapshot_id=snapshot_id, state="open")
        risk = list_in(conn, scope=scope, snapshot_id=snapshot_id, resolution="accepted_risk")
        rechecked = list_in(conn, scope=scope, snapshot_id=snapshot_id, resolution="rechecked")
        ids = [c.claim_id for c in checks]
        evidence = _receipt_evidence(conn, ids) if require_signed is not None else []
    with store.reading() as conn:
        refuted_ids = [c.claim_id for c in checks if c.outcome == "refuted"]
        claims = load_claims(conn, [o.claim_id for o in still_open] + refuted_ids)
        by_claim = {c.claim_id: c for c in checks}
        entries, omitted = gate_entries(conn, still_open, claims, by_claim, target, source)
    refuted = refuted_claims(claims, checks)
    refused: list[str] = []
    if require_signed is not None:
        uses = [(f"claim {claim_id}", receipt) for claim_id, receipt in evidence]
        uses += [(f"obligation {o.obligation_id}", o.receipt) for o in rechecked if o.receipt]
        for who, receipt in uses:
            why = require_signed(receipt)
            if why is not None:
                refused.append(f"{who}: receipt {receipt}: {why}")
    return GateReport(
        snapshot_id=snapshot_id,
        scope=scope,
        checked=len(checks),
        opened=tuple(opened),
        open_obligations=tuple(still_open),
        passed=not still_open and not refused and not (fail_on_refuted and refuted),
        accepted_risk=tuple(risk),
        current_again=tuple(closed),
        whole_store=scope is None,
        unsigned_evidence=tuple(refused),
        entries=tuple(entries),
        refuted=tuple(refuted),
        fail_on_refuted=fail_on_refuted,
        recheck_command=recheck_command(snapshot_id, scope) if still_open else None,
        moved_omitted=omitted,
    )


def check_live_claims(
    store: Store,
    snapshot_id: str,
    scope: str | None,
    *,
    interface: str,
    source: SnapshotSource,
    allow_empty: bool = False,
) -> tuple[list[ClaimCheck], list[Obligation], list[Obligation]]:
    """Check every live claim (in ``scope``) on ``snapshot_id``, open an obligation on it
    for each one not current and close those current again; return the checks and the
    obligations opened and closed.

    Raises, before writing anything, NotFound (the snapshot) and InvalidInput (a scope
    without a live claim, unless ``allow_empty``); StoreUnavailable.
    """
    source.require(snapshot_id, "snapshot_id")
    with store.reading() as conn:
        ids = require_live_claims(conn, scope, allow_empty=allow_empty)
        heads = load_heads(conn, ids)
        baselines = load_baselines(conn, ids)
    checks = evaluate_claims(heads, baselines, snapshot_id, source)
    with store.transaction() as conn:
        opened = open_obligations(conn, checks, None, interface)
        # an obligation_opened event already carries the claim's applicability
        record_checks(conn, checks, interface, announced={o.claim_id for o in opened})
        closed = close_current_again(conn, checks, interface)
    return checks, opened, closed


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
