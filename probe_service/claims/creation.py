"""Recording claims and model-authored answers (``claim_create``,
``knowledge_record_answer``, ``claim_supersede``).

Baselines, span hashes and receipt outcomes are computed here from the snapshot and the
receipt lookup before the write transaction; the transaction then admits the claim
(tombstone check, supersession checks) and writes every row, the audit entry and the
event together, so a refused claim leaves nothing behind.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, insert, select

from ..errors import Conflict, EvidenceMismatch, InvalidClaim, NotFound
from ..plans import load_plan
from ..plans.tables import receipts
from ..policies.clearing import ClearingRule
from ..principals import current_actor
from ..store import Store, append_event, utc_now
from ..store.referents import gc_removed, hold_referents
from ..store.schema import snapshots
from .audit import append_audit
from .baselines import boundary_key, compute_baseline, compute_span
from .callers import PYTHON_CALLER, Caller, snapshots_for
from .digests import digest_json
from .models import AnswerRequest, ClaimRequest, Dependency, parse_request
from .receipts import ReceiptLookup, outcome_from_receipts
from .records import Baseline, ClaimRecord, EvidenceRecord, Outcome
from .reviews import authorize_direct
from .rows import insert_claim, load_claim, load_claims
from .sources import SnapshotSource
from .tables import claim_supersessions, claim_tombstones, claims
from .views import TreeView

__all__ = [
    "build_answer",
    "claim_create",
    "claim_supersede",
    "knowledge_record_answer",
    "record_digest_of",
    "write_answer",
]

_ORACLE_OUTCOMES = frozenset({"supports", "refutes", "inconclusive"})


def claim_create(
    store: Store,
    request: ClaimRequest | dict[str, Any],
    *,
    receipts: ReceiptLookup,
    caller: Caller = PYTHON_CALLER,
    allow_tombstoned: bool = False,
    allow_incomplete: bool = False,
    source: SnapshotSource | None = None,
) -> ClaimRecord:
    """Record a claim; its outcome follows its receipts and its baselines its snapshot.

    A statement and boundary matching a withdrawn claim in the same scope raises Conflict
    unless ``allow_tombstoned``, which records it with ``flagged="tombstone"``. A claim
    identical to a live one (same scope, statement, kind, snapshot, evidence and
    dependencies) is not recorded twice: the live claim is returned.
    Raises InvalidClaim (bad input, unknown receipt, asserted outcome the evidence does not
    carry, negative query that already matches or, unless ``allow_incomplete``, is
    incomplete), EvidenceMismatch (a receipt ran on another snapshot), NotFound (snapshot
    or blob missing).
    """
    req = parse_request(ClaimRequest, request)
    record = build_claim(
        req, receipts, source or snapshots_for(store, caller), allow_incomplete=allow_incomplete
    )
    with store.transaction() as conn:
        twin = _live_twin(conn, record)
        if twin is not None:
            return twin
        record = _write(conn, record, "claim_create", caller.face, allow_tombstoned)
    return record


def claim_supersede(
    store: Store,
    predecessor_id: str,
    request: ClaimRequest | dict[str, Any],
    *,
    rationale: str,
    receipts: ReceiptLookup,
    caller: Caller = PYTHON_CALLER,
    allow_tombstoned: bool = False,
    allow_incomplete: bool = False,
    source: SnapshotSource | None = None,
    clearing: Sequence[ClearingRule] = (),
) -> ClaimRecord:
    """Record a successor claim and link it to ``predecessor_id`` in one transaction.

    Raises NotFound (predecessor not in the successor's scope), Conflict (predecessor
    already superseded or withdrawn), InvalidClaim (missing rationale, bad successor),
    NotPermitted (the ``clearing`` rule of its scope); on any refusal the predecessor is
    untouched and no successor exists.
    """
    if not rationale.strip():
        raise InvalidClaim("rationale: required")
    req = parse_request(ClaimRequest, request)
    record = build_claim(
        req, receipts, source or snapshots_for(store, caller), allow_incomplete=allow_incomplete
    )
    authorize_direct(clearing, current_actor(), record.scope, "superseded", "claim_supersede")
    with store.transaction() as conn:
        link_supersession(
            conn, predecessor_id, record.claim_id, record.scope, rationale, check_successor=False
        )
        record = _write(
            conn, record, "claim_supersede", caller.face, allow_tombstoned, [predecessor_id]
        )
        conn.execute(
            insert(claim_supersessions).values(
                predecessor_id=predecessor_id,
                successor_id=record.claim_id,
                scope=record.scope,
                rationale=rationale,
                created_at=utc_now(),
            )
        )
        append_event(
            conn,
            "claim_superseded",
            predecessor_id,
            {"scope": record.scope, "successor_id": record.claim_id},
        )
    return record.model_copy(update={"supersedes": predecessor_id})


def knowledge_record_answer(
    store: Store,
    request: AnswerRequest | dict[str, Any],
    *,
    caller: Caller = PYTHON_CALLER,
    allow_tombstoned: bool = False,
    source: SnapshotSource | None = None,
) -> ClaimRecord:
    """Store a model-authored answer with its spans and boundary, always ``unresolved``.

    Raises InvalidClaim (bad input), NotFound (snapshot or blob missing), Conflict
    (matches a withdrawn answer's boundary, unless ``allow_tombstoned``).
    """
    req = parse_request(AnswerRequest, request, "answer")
    record = build_answer(req, source or snapshots_for(store, caller))
    with store.transaction() as conn:
        record = write_answer(conn, record, caller.face, allow_tombstoned)
    return record


def build_answer(req: AnswerRequest, source: SnapshotSource) -> ClaimRecord:
    """Compute the spans and baselines of an answer, always ``unresolved``; nothing is
    written. Raises InvalidClaim (a span or dependency the snapshot refuses), NotFound
    (snapshot or blob missing)."""
    tree = source.require(req.snapshot_id)
    evidence = [compute_span(i, span, tree) for i, span in enumerate(req.spans)]
    # Current code is not proof that the model interpreted it correctly
    # (docs/ARCHITECTURE.md, "Trust rules").
    return _assemble(
        req.scope,
        req.answer,
        "answer",
        req.snapshot_id,
        evidence,
        _baselines(req.dependencies, tree),
        req.dependencies,
        outcome="unresolved",
        origin="answer",
        question=req.question,
    )


def write_answer(
    conn: Connection, record: ClaimRecord, interface: str, allow_tombstoned: bool = False
) -> ClaimRecord:
    """Write an answer ``build_answer`` made in the caller's transaction (so a turn's
    answer and its turn record commit together). Raises Conflict (a withdrawn boundary)."""
    return _write(conn, record, "knowledge_record_answer", interface, allow_tombstoned)


def build_claim(
    req: ClaimRequest,
    receipts: ReceiptLookup,
    source: SnapshotSource,
    *,
    allow_incomplete: bool = False,
) -> ClaimRecord:
    """Compute evidence, outcome and baselines of ``req``; nothing is written."""
    tree = source.require(req.snapshot_id)
    evidence = [_evidence(i, ev, tree, receipts, source) for i, ev in enumerate(req.evidence)]
    outcome = outcome_from_receipts(e.receipt_outcome for e in evidence if e.receipt_outcome)
    if req.outcome is not None and req.outcome != outcome:
        raise InvalidClaim(
            f"outcome: {req.outcome!r} is not what the evidence carries ({outcome!r})"
        )
    return _assemble(
        req.scope,
        req.statement,
        req.kind,
        req.snapshot_id,
        evidence,
        _baselines(req.dependencies, tree, allow_incomplete),
        req.dependencies,
        outcome=outcome,
    )


def _evidence(
    position: int, ev: Any, tree: TreeView, receipts: ReceiptLookup, source: SnapshotSource
) -> EvidenceRecord:
    if ev.span is not None:
        return compute_span(position, ev.span, tree)
    if ev.text is not None:
        return EvidenceRecord(kind="text", text=ev.text)
    if ev.plan is not None:
        return _declared_plan(position, ev.plan, tree, source)
    facts = receipts(ev.receipt)
    if facts is None:
        raise InvalidClaim(f"evidence[{position}].receipt: unknown receipt {ev.receipt!r}")
    if facts.outcome not in _ORACLE_OUTCOMES:
        raise InvalidClaim(
            f"evidence[{position}].receipt: unexpected oracle outcome {facts.outcome!r}"
        )
    # A receipt is evidence only for the snapshot it ran on (docs/ARCHITECTURE.md,
    # "Trust rules").
    if facts.snapshot_id is not None and facts.snapshot_id != tree.snapshot_id:
        raise EvidenceMismatch(
            f"evidence[{position}].receipt: receipt {ev.receipt} ran on snapshot "
            f"{facts.snapshot_id}, not on the claim's snapshot {tree.snapshot_id}"
        )
    return EvidenceRecord(
        kind="receipt",
        receipt=ev.receipt,
        receipt_outcome=facts.outcome,
        receipt_signer=facts.signer,
    )


def _declared_plan(
    position: int, plan_id: str, tree: TreeView, source: SnapshotSource
) -> EvidenceRecord:
    """A plan the claim declares as its recheck: stored, and made for the claim's snapshot."""
    try:
        plan = load_plan(source.store, plan_id)
    except NotFound as exc:
        raise NotFound(f"evidence[{position}].plan: no stored plan {plan_id}") from exc
    if plan.snapshot_id != tree.snapshot_id:
        raise EvidenceMismatch(
            f"evidence[{position}].plan: plan {plan_id} is for snapshot {plan.snapshot_id}, "
            f"not the claim's snapshot {tree.snapshot_id}"
        )
    return EvidenceRecord(kind="plan", plan=plan_id)


def _baselines(
    dependencies: Sequence[Dependency], tree: TreeView, allow_incomplete: bool = False
) -> list[Baseline]:
    return [
        compute_baseline(i, dep, tree, allow_incomplete=allow_incomplete)
        for i, dep in enumerate(dependencies)
    ]


def _live_twin(conn: Connection, record: ClaimRecord) -> ClaimRecord | None:
    """A live claim with the same content as ``record`` (its ``record_digest``), if any."""
    c = claims.c
    ids = conn.execute(
        select(c.claim_id)
        .where(c.scope == record.scope, c.boundary_key == record.boundary_key)
        .where(c.record_digest == record.record_digest)
        .order_by(c.created_at, c.claim_id)
    ).scalars()
    for found in load_claims(conn, list(ids)).values():
        if not found.withdrawn and found.superseded_by is None:
            return found
    return None


def _assemble(
    scope: str,
    statement: str,
    kind: str,
    snapshot_id: str,
    evidence: list[EvidenceRecord],
    baselines: list[Baseline],
    dependencies: Sequence[Dependency],
    *,
    outcome: Outcome,
    origin: str = "claim",
    question: str | None = None,
) -> ClaimRecord:
    fields: dict[str, Any] = {
        "claim_id": "clm_" + uuid.uuid4().hex,
        "scope": scope,
        "statement": statement,
        "kind": kind,
        "origin": origin,
        "question": question,
        "outcome": outcome,
        "snapshot_id": snapshot_id,
        "boundary_key": boundary_key(scope, (question or "") + " " + statement, dependencies),
        "created_at": utc_now(),
        "evidence": tuple(evidence),
        "dependencies": tuple(baselines),
    }
    return ClaimRecord(
        **fields, record_digest=record_digest_of(ClaimRecord(**fields, record_digest=""))
    )


def record_digest_of(record: ClaimRecord) -> str:
    """The content digest a claim is recorded with: everything it was created with but its
    id, time, signer names and what came after (flag, links); a bundle's import recomputes
    it (docs/ARCHITECTURE.md, "Bundles")."""
    created = record.model_copy(
        update={"flagged": None, "supersedes": None, "superseded_by": None, "withdrawn": False}
    )
    return digest_json(
        created.model_dump(
            mode="json",
            exclude={
                "claim_id": True,
                "created_at": True,
                "record_digest": True,
                "evidence": {"__all__": {"receipt_signer"}},
            },
        )
    )


def _admit(conn: Connection, record: ClaimRecord, allow_tombstoned: bool) -> ClaimRecord:
    tomb = claim_tombstones.c
    withdrawn = conn.execute(
        select(tomb.claim_id).where(
            tomb.scope == record.scope, tomb.boundary_key == record.boundary_key
        )
    ).first()
    if withdrawn is None:
        return record
    if not allow_tombstoned:
        raise Conflict(
            f"statement: the same statement and boundary were withdrawn as {withdrawn[0]} "
            "in this scope; record it again only with the explicit tombstone override"
        )
    return record.model_copy(update={"flagged": "tombstone"})


def _hold_evidence(conn: Connection, record: ClaimRecord) -> None:
    """Hold the claim's snapshot and receipts until this transaction commits, and refuse
    the claim when gc removed one after it was read (docs/ARCHITECTURE.md, "Retention and
    gc"). A store gc never removed that kind from cannot have lost one that way, and the
    lookup the claim was built with stays the authority there.

    Raises NotFound naming the object.
    """
    held = hold_referents(conn, snapshots.c.snapshot_id, [record.snapshot_id])
    if not held and gc_removed(conn, "snapshots"):
        raise NotFound(f"snapshot_id: snapshot {record.snapshot_id} is no longer stored (gc)")
    cited = {e.receipt for e in record.evidence if e.receipt is not None}
    missing = cited - hold_referents(conn, receipts.c.receipt_sha256, cited)
    if missing and gc_removed(conn, "receipts"):
        raise NotFound(f"evidence: receipt {sorted(missing)[0]} is no longer stored (gc)")


def _write(
    conn: Connection,
    record: ClaimRecord,
    operation: str,
    interface: str,
    allow_tombstoned: bool,
    subjects: Sequence[str] = (),
) -> ClaimRecord:
    """Admit ``record`` (``_admit``), insert it, audit it and announce it; the admitted
    record (flagged when it overrides a tombstone)."""
    record = _admit(conn, record, allow_tombstoned)
    _hold_evidence(conn, record)
    insert_claim(conn, record)
    append_audit(
        conn,
        operation=operation,
        interface=interface,
        scope=record.scope,
        subject_ids=[record.claim_id, *subjects],
        before=None,
        after=record.record_digest,
    )
    append_event(
        conn,
        "claim_created",
        record.claim_id,
        {
            "scope": record.scope,
            "origin": record.origin,
            "outcome": record.outcome,
            "flagged": record.flagged,
        },
    )
    return record


def link_supersession(
    conn: Connection,
    predecessor_id: str,
    successor_id: str,
    scope: str,
    rationale: str,
    *,
    check_successor: bool = True,
) -> None:
    """Check that ``predecessor_id`` can be superseded by ``successor_id`` in ``scope``.

    Raises NotFound (either claim not in scope), Conflict (already superseded, withdrawn,
    or the successor is the predecessor).
    """
    predecessor = load_claim(conn, predecessor_id, scope)
    if check_successor:
        load_claim(conn, successor_id, scope)
    if predecessor_id == successor_id:
        raise Conflict("successor_claim_id: a claim cannot supersede itself")
    if predecessor.superseded_by is not None:
        raise Conflict(
            f"claim {predecessor_id} is already superseded by {predecessor.superseded_by}"
        )
    if predecessor.withdrawn:
        raise Conflict(f"claim {predecessor_id} was withdrawn; it cannot be superseded")
    if not rationale.strip():
        raise InvalidClaim("rationale: required")
