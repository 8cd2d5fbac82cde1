"""Recheck obligations: opened idempotently, listed by filter, resolved with a rationale.

An obligation is unique per (claim, target snapshot); analysing the same change twice opens
nothing new. Resolution adds an ``obligation_resolutions`` row; nothing is updated.
Resolutions must agree with their evidence (docs/ARCHITECTURE.md, "Trust rules": an
obligation is closed only by evidence that agrees with the claim, on the target snapshot):
``rechecked`` names a receipt that ran the claim's plan on the obligation's snapshot and
carries the claim's outcome; ``accepted_risk`` keeps its rationale and is never reported as
checked; ``current_again`` is recorded only by a check, never by a caller.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Literal

from sqlalchemy import Connection, Insert, select

from ..errors import Conflict, EvidenceMismatch, InvalidClaim, NotFound
from ..plans.tables import plans
from ..policies.clearing import ClearingRule
from ..principals import current_actor
from ..store import Store, append_events, insert_on_conflict, utc_now
from ..store.origins import imported_from
from .audit import append_audit
from .callers import PYTHON_CALLER, Caller
from .digests import digest_json
from .lineage import record_supersession, withdraw_in
from .receipts import AGREES, ReceiptFacts, ReceiptLookup, no_receipts, plan_shape
from .records import ClaimCheck, ClaimRecord, Obligation, Resolved
from .resolutions import MAX_LIST, list_in, obligation_from_row, resolve_in
from .reviews import (
    ReviewRequest,
    authorize,
    load_review,
    record_review_request,
    review_decision_in,
)
from .rows import load_claim, reasons_json
from .tables import obligations

__all__ = [
    "RESOLUTIONS",
    "check_recheck",
    "declared_shapes",
    "list_in",
    "obligation_list",
    "obligation_resolve",
    "open_obligations",
    "review_decide",
]

Resolution = Literal["rechecked", "accepted_risk", "superseded", "withdrawn", "current_again"]
#: What a caller may resolve with; ``current_again`` is recorded by checks only.
RESOLUTIONS: tuple[str, ...] = ("rechecked", "accepted_risk", "superseded", "withdrawn")


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
    opened = [
        obligation_from_row(row, None) for row in rows.values() if row["obligation_id"] in inserted
    ]
    _announce_opened(conn, opened, interface)
    return opened


def _announce_opened(conn: Connection, opened: Sequence[Obligation], interface: str) -> None:
    append_events(
        conn,
        [
            (
                "obligation_opened",
                obligation.obligation_id,
                {
                    "scope": obligation.scope,
                    "claim_id": obligation.claim_id,
                    "snapshot_id": obligation.snapshot_id,
                    "applicability": obligation.applicability,
                },
            )
            for obligation in opened
        ],
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
    """Obligations matching every given filter, oldest first (at most ``limit``).

    Raises InvalidClaim when ``limit`` is outside 1..MAX_LIST.
    """
    if not 1 <= limit <= MAX_LIST:
        raise InvalidClaim(f"limit: {limit} is outside 1..{MAX_LIST}")
    with store.reading() as conn:
        return list_in(
            conn, scope=scope, state=state, claim_id=claim_id, snapshot_id=snapshot_id, limit=limit
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
    caller: Caller = PYTHON_CALLER,
    clearing: Sequence[ClearingRule] = (),
) -> Resolved:
    """Resolve an open obligation; the rationale, interface and actor are kept.

    The actor is the operation's (``principals.current_actor``), never a parameter; the
    ``clearing`` rules decide whether it may (NotPermitted naming the rule) and whether
    the resolution is only a review request for a second person (then the obligation
    stays open and the answer carries the request: docs/ARCHITECTURE.md, "Principals and
    clearing").

    ``rechecked`` names a receipt that ran the claim's plan on the obligation's snapshot and
    agrees with the claim's outcome; ``superseded`` names the successor claim (linked now if
    it is not yet); ``withdrawn`` withdraws the claim (tombstone), closing its other open
    obligations too. Raises InvalidClaim (bad resolution, missing rationale/receipt/
    successor), EvidenceMismatch (the receipt ran another plan or snapshot, or disagrees),
    NotFound, Conflict (already resolved).
    """
    _check_resolution(resolution, rationale, receipt, successor_claim_id)
    with store.transaction() as conn:
        found = list_in(conn, obligation_id=obligation_id, scope=scope)
        if not found:
            raise NotFound(f"obligation_id: no obligation {obligation_id!r}")
        before = found[0]
        if before.state == "resolved":
            raise Conflict(f"obligation {obligation_id} is already resolved ({before.resolution})")
        actor = current_actor()
        permission = authorize(clearing, actor, before.scope, resolution)
        if permission is not None and permission.reviewers:
            if successor_claim_id is not None:
                load_claim(conn, successor_claim_id)  # refused now, not at approval
            request = record_review_request(
                conn,
                obligation_id=before.obligation_id,
                scope=before.scope,
                resolution=resolution,
                rationale=rationale,
                successor_claim_id=successor_claim_id,
                actor=actor,
            )
            return Resolved(**before.model_dump(), review=request)
        signer = None
        if resolution == "rechecked" and receipt is not None:
            _refuse_imported(conn, receipt)
            claim = load_claim(conn, before.claim_id)
            facts = check_recheck(claim, before, receipt, receipts, declared_shapes(conn, claim))
            signer = facts.signer
        (after,) = resolve_in(
            conn,
            [before],
            resolution,
            rationale,
            interface=caller.face,
            resolved_by=actor.name,
            receipt=receipt,
            successor_claim_id=successor_claim_id,
            receipt_signer=signer,
        )
        _apply_side_effect(conn, before, resolution, rationale, successor_claim_id, caller.face)
    return Resolved(**after.model_dump())


def review_decide(
    store: Store,
    review_id: str,
    decision: Literal["approve", "reject"],
    rationale: str,
    *,
    clearing: Sequence[ClearingRule],
    caller: Caller = PYTHON_CALLER,
) -> ReviewRequest:
    """Approve or reject a pending review request as the operation's actor; an approval
    records the requested resolution (as the requester's) in the same transaction.

    Raises NotFound, NotPermitted (not a listed reviewer, a self-review, no reviewer
    listed now), Conflict (already decided, or the obligation was resolved meanwhile).
    """
    actor = current_actor()
    with store.transaction() as conn:
        request = load_review(conn, review_id)
        decided = review_decision_in(
            conn, request, decision, rationale, rules=clearing, actor=actor
        )
        if decision == "approve":
            found = list_in(conn, obligation_id=request.obligation_id)
            before = found[0]
            if before.state == "resolved":
                raise Conflict(
                    f"obligation {before.obligation_id} was resolved meanwhile "
                    f"({before.resolution}); review {review_id} cannot approve it"
                )
            resolve_in(
                conn,
                [before],
                request.resolution,
                request.rationale,
                interface=request.interface,
                resolved_by=request.requested_by,
                successor_claim_id=request.successor_claim_id,
            )
            _apply_side_effect(
                conn,
                before,
                request.resolution,
                request.rationale,
                request.successor_claim_id,
                caller.face,
            )
    return decided


def _refuse_imported(conn: Connection, receipt: str) -> None:
    """Imported evidence never closes an obligation of this store (docs/ARCHITECTURE.md,
    "Bundles"): only a receipt of a run here counts as rechecked."""
    origin = imported_from(conn, "receipt", [receipt])
    if origin:
        raise EvidenceMismatch(
            f"receipt: receipt {receipt} was imported (bundle {origin[receipt]}); only evidence "
            "rechecked in this store resolves its obligations: run the recheck here"
        )


def _check_resolution(
    resolution: str, rationale: str, receipt: str | None, successor: str | None
) -> None:
    if resolution not in RESOLUTIONS:
        raise InvalidClaim(f"resolution: {resolution!r} is not one of {', '.join(RESOLUTIONS)}")
    if not rationale or not rationale.strip():
        raise InvalidClaim(f"rationale: required for a {resolution!r} resolution")
    if resolution == "rechecked" and not receipt:
        raise InvalidClaim("receipt: a 'rechecked' resolution names the new receipt")
    if resolution != "rechecked" and receipt is not None:
        raise InvalidClaim("receipt: only a 'rechecked' resolution names a receipt")
    if (resolution == "superseded") != (successor is not None):
        raise InvalidClaim("successor_claim_id: named by, and only by, a 'superseded' resolution")


def check_recheck(
    claim: ClaimRecord,
    obligation: Obligation,
    receipt: str,
    receipts: ReceiptLookup,
    declared: set[str],
) -> ReceiptFacts:
    """A recheck counts only if it ran the claim's plan on the obligation's snapshot and
    carries the claim's outcome; return its facts, raise InvalidClaim or EvidenceMismatch
    otherwise."""
    facts = receipts(receipt)
    if facts is None:
        raise InvalidClaim(f"receipt: unknown receipt {receipt!r}")
    if facts.snapshot_id != obligation.snapshot_id:
        raise EvidenceMismatch(
            f"receipt: receipt {receipt} ran on snapshot {facts.snapshot_id}, not on the "
            f"obligation's snapshot {obligation.snapshot_id}"
        )
    plans = _claim_plans(claim, receipts) | declared
    if facts.plan_shape is None or facts.plan_shape not in plans:
        raise EvidenceMismatch(
            f"receipt: receipt {receipt} did not run the plan of claim {claim.claim_id}"
            + ("" if plans else " (the claim names no plan: no receipt or declared plan)")
        )
    if AGREES.get(facts.outcome) != claim.outcome:
        raise EvidenceMismatch(
            f"receipt: receipt {receipt} {facts.outcome} while claim {claim.claim_id} is "
            f"{claim.outcome}; record the new outcome as a new claim superseding "
            f"{claim.claim_id}: create it, then resolve this obligation as superseded "
            "naming it as the successor"
        )
    return facts


def _claim_plans(claim: ClaimRecord, receipts: ReceiptLookup) -> set[str]:
    """The snapshot-independent plan shapes the claim's receipt evidence ran."""
    found = (receipts(ev.receipt) for ev in claim.evidence if ev.receipt is not None)
    return {f.plan_shape for f in found if isinstance(f, ReceiptFacts) and f.plan_shape}


def declared_shapes(conn: Connection, claim: ClaimRecord) -> set[str]:
    """The snapshot-independent shapes of the plans the claim declares."""
    ids = [ev.plan for ev in claim.evidence if ev.plan is not None]
    if not ids:
        return set()
    bodies = conn.execute(select(plans.c.body).where(plans.c.plan_id.in_(ids))).scalars()
    return {shape for body in bodies if (shape := plan_shape(json.loads(body)))}


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
