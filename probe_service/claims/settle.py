"""Settling a recheck once every run of its batch is done, exactly once.

docs/ARCHITECTURE.md, "Recheck": whoever sees the batch complete settles it — the worker
(or the embedded thread) that finished its last run, or any poll (``batch_status``, the
CLI's wait, the next recheck). Each rerun's receipt is judged by the rule of a manual
``rechecked`` resolution (``obligations.check_recheck``: the claim's plan, on the
obligation's snapshot, carrying the claim's outcome). An obligation whose reruns all agree
is resolved ``rechecked``; one with a rerun that does not agree stays open, and the
settlement names that receipt. The settlement row's primary key is the batch id, written
in the transaction of the resolutions: a second settler's insert finds it and writes
nothing, so two workers finishing the last two runs at once resolve each obligation once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, Row, select

from ..errors import Conflict, EvidenceMismatch, InvalidClaim
from ..store import Store, append_events, insert_on_conflict, utc_now
from .next_steps import after_disagreement, recheck_command
from .obligations import check_recheck, declared_shapes
from .receipts import AGREES, ReceiptLookup
from .recheck_records import RecheckEntry, RecheckReport, RerunRecord, RunLike
from .records import ClaimRecord, Obligation
from .resolutions import list_in, resolve_in
from .rows import load_claims
from .tables import recheck_items, recheck_settlements, rechecks

__all__ = ["recheck_batch_of_run", "recheck_report", "settle_recheck"]

#: Settling retries once when a resolution raced it (a person resolved an obligation
#: between the settlement's read and its write): the second attempt sees that resolution.
_ATTEMPTS = 2


def recheck_batch_of_run(store: Store, run_id: str) -> str | None:
    """The batch of the recheck ``run_id`` reruns evidence for, or None (one indexed read;
    every finished run asks it)."""
    with store.reading() as conn:
        found = conn.execute(
            select(recheck_items.c.batch_id).where(recheck_items.c.run_id == run_id).limit(1)
        ).scalar()
    return None if found is None else str(found)


def settle_recheck(
    store: Store,
    batch_id: str,
    runs: Sequence[RunLike],
    receipts: ReceiptLookup,
    *,
    settled_by: str,
) -> RecheckReport | None:
    """The report of the recheck whose batch is ``batch_id``, settled first when every
    run of ``runs`` (its batch's runs) is done and no one settled it yet; None when the
    batch is not a recheck's.

    Raises StoreUnavailable.
    """
    with store.reading() as conn:
        head = conn.execute(select(rechecks).where(rechecks.c.batch_id == batch_id)).first()
        if head is None:
            return None
        items = _items(conn, batch_id)
        verdicts = _stored_verdicts(conn, batch_id)
    by_run = {run.run_id: run for run in runs}
    if verdicts is None and all(_done(by_run, item.run_id) for item in items):
        verdicts = _settle(store, head, items, by_run, receipts, settled_by)
    return recheck_report(store, head, items, by_run, verdicts)


def _done(by_run: Mapping[str, RunLike], run_id: str) -> bool:
    run = by_run.get(run_id)
    return run is not None and run.state == "done"


def _items(conn: Connection, batch_id: str) -> list[Row[Any]]:
    ri = recheck_items.c
    return list(
        conn.execute(select(recheck_items).where(ri.batch_id == batch_id).order_by(ri.position))
    )


def _stored_verdicts(conn: Connection, batch_id: str) -> dict[str, Any] | None:
    raw = conn.execute(
        select(recheck_settlements.c.verdicts).where(recheck_settlements.c.batch_id == batch_id)
    ).scalar()
    return None if raw is None else dict(json.loads(raw))


def _settle(
    store: Store,
    head: Row[Any],
    items: Sequence[Row[Any]],
    by_run: Mapping[str, RunLike],
    receipts: ReceiptLookup,
    settled_by: str,
) -> dict[str, Any]:
    """Judge every rerun, then resolve in one transaction that inserts the settlement row;
    return the verdicts this settlement (or the one that won the race) recorded."""
    judged = _judge(store, items, by_run, receipts)
    for attempt in range(_ATTEMPTS):
        try:
            with store.transaction() as conn:
                won = _write(conn, head, items, judged, settled_by)
                if won is not None:
                    return won
                stored = _stored_verdicts(conn, head.batch_id)
                assert stored is not None  # noqa: S101 - the conflicting row exists
                return stored
        except Conflict:
            if attempt + 1 == _ATTEMPTS:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def _judge(
    store: Store,
    items: Sequence[Row[Any]],
    by_run: Mapping[str, RunLike],
    receipts: ReceiptLookup,
) -> dict[str, dict[str, Any]]:
    """Per run: whether its receipt agrees with the claim on the obligation's snapshot,
    why not, and the receipt's signer; read only."""
    with store.reading() as conn:
        claims = load_claims(conn, [item.claim_id for item in items])
        declared = {cid: declared_shapes(conn, claim) for cid, claim in claims.items()}
        obligations = {
            item.obligation_id: list_in(conn, obligation_id=item.obligation_id)[0] for item in items
        }
    judged: dict[str, dict[str, Any]] = {}
    for item in items:
        run = by_run[item.run_id]
        claim, obligation = claims[item.claim_id], obligations[item.obligation_id]
        judged[item.run_id] = _judge_one(run, claim, obligation, receipts, declared[claim.claim_id])
    return judged


def _judge_one(
    run: RunLike,
    claim: ClaimRecord,
    obligation: Obligation,
    receipts: ReceiptLookup,
    declared: set[str],
) -> dict[str, Any]:
    receipt = run.receipt_sha256
    found = {"receipt": receipt, "outcome": run.outcome, "reason": run.reason}
    if receipt is None:
        why = f"the run ended without a receipt ({run.reason or 'no reason'})"
        return {**found, "agrees": False, "why": why, "signer": None}
    try:
        facts = check_recheck(claim, obligation, receipt, receipts, declared)
    except (EvidenceMismatch, InvalidClaim) as exc:
        why = str(exc).removeprefix("receipt: ")
        if AGREES.get(run.outcome or "") != claim.outcome:
            # The fact that matters first, in a few words; the next step says what to do.
            why = (
                f"receipt {receipt} {run.outcome} ({run.reason or 'no reason'}) while the "
                f"claim is {claim.outcome}"
            )
        return {**found, "agrees": False, "why": why, "signer": None}
    return {**found, "agrees": True, "why": None, "signer": facts.signer}


def _write(
    conn: Connection,
    head: Row[Any],
    items: Sequence[Row[Any]],
    judged: Mapping[str, dict[str, Any]],
    settled_by: str,
) -> dict[str, Any] | None:
    """Insert the settlement row and, if this settlement won it, the resolutions and
    events; return the verdicts, or None when another settler's row was there first."""
    by_obligation: dict[str, list[Row[Any]]] = {}
    for item in items:
        by_obligation.setdefault(item.obligation_id, []).append(item)
    now_open = {oid: list_in(conn, obligation_id=oid)[0] for oid in by_obligation}
    verdicts: dict[str, Any] = {"obligations": {}}
    for oid, group in by_obligation.items():
        runs = {item.run_id: judged[item.run_id] for item in group}
        if now_open[oid].state == "resolved":
            status = "already_resolved"
        else:
            status = "rechecked" if all(r["agrees"] for r in runs.values()) else "disagreed"
        verdicts["obligations"][oid] = {"status": status, "runs": runs}
    inserted = conn.execute(
        insert_on_conflict(conn, recheck_settlements)
        .values(
            batch_id=head.batch_id,
            settled_at=utc_now(),
            settled_by=settled_by[:255],
            verdicts=json.dumps(verdicts, sort_keys=True),
        )
        .on_conflict_do_nothing(index_elements=["batch_id"])
        .returning(recheck_settlements.c.batch_id)
    ).first()
    if inserted is None:
        return None
    _apply(conn, head, by_obligation, now_open, verdicts["obligations"])
    return verdicts


def _apply(
    conn: Connection,
    head: Row[Any],
    by_obligation: Mapping[str, Sequence[Row[Any]]],
    now_open: Mapping[str, Obligation],
    verdicts: Mapping[str, Any],
) -> None:
    """Resolve the agreeing obligations; announce the disagreeing ones."""
    disagreed: list[tuple[str, str, dict[str, Any]]] = []
    for oid, group in by_obligation.items():
        verdict = verdicts[oid]
        if verdict["status"] == "rechecked":
            first = group[0]
            receipt = _receipt_of(verdict, first.run_id)
            rationale = (
                f"byte-probe recheck (batch {head.batch_id}): every rerun of the claim's "
                f"evidence on {head.snapshot_id} agrees with it: "
                + ", ".join(_receipt_of(verdict, item.run_id) for item in group)
            )
            resolve_in(
                conn,
                [now_open[oid]],
                "rechecked",
                rationale,
                interface=head.interface,
                resolved_by=head.requested_by or "byte-probe",
                receipt=receipt,
                receipt_signer=verdict["runs"][first.run_id]["signer"],
            )
        elif verdict["status"] == "disagreed":
            payload = {"batch_id": head.batch_id, "claim_id": now_open[oid].claim_id}
            disagreed.append(("obligation_recheck_disagreed", oid, payload))
    append_events(conn, disagreed)


def _receipt_of(verdict: Mapping[str, Any], run_id: str) -> str:
    receipt = verdict["runs"][run_id].get("receipt")
    return str(receipt)


def recheck_report(
    store: Store,
    head: Row[Any],
    items: Sequence[Row[Any]],
    by_run: Mapping[str, RunLike],
    verdicts: Mapping[str, Any] | None,
) -> RecheckReport:
    """The report of a stored recheck from its items, its runs and its settlement."""
    with store.reading() as conn:
        claims = load_claims(conn, [item.claim_id for item in items])
    groups: dict[str, list[Row[Any]]] = {}
    for item in items:
        groups.setdefault(item.obligation_id, []).append(item)
    entries = []
    for oid, group in groups.items():
        claim = claims[group[0].claim_id]
        verdict = None if verdicts is None else verdicts["obligations"].get(oid)
        reruns = tuple(_rerun(item, by_run.get(item.run_id), verdict) for item in group)
        entries.append(_entry(head, oid, claim, reruns, verdict))
    return RecheckReport(
        batch_id=head.batch_id,
        snapshot_id=head.snapshot_id,
        scope=head.scope,
        settled=verdicts is not None,
        entries=tuple(entries),
        counts=count_statuses(entries),
    )


def count_statuses(entries: Sequence[RecheckEntry]) -> dict[str, int]:
    """Entries by status."""
    counts: dict[str, int] = {}
    for entry in entries:
        counts[entry.status] = counts.get(entry.status, 0) + 1
    return counts


def _rerun(item: Row[Any], run: RunLike | None, verdict: Mapping[str, Any] | None) -> RerunRecord:
    judged = None if verdict is None else verdict["runs"].get(item.run_id)
    return RerunRecord(
        evidence_kind=item.evidence_kind,
        evidence=item.evidence,
        plan_id=item.plan_id,
        policy_id=item.policy_id,
        run_id=item.run_id,
        state=run.state if run is not None else "unknown",
        outcome=None if run is None else run.outcome,
        reason=None if run is None else run.reason,
        receipt_sha256=None if run is None else run.receipt_sha256,
        agrees=None if judged is None else judged["agrees"],
        why=None if judged is None else judged["why"],
    )


def _entry(
    head: Row[Any],
    obligation_id: str,
    claim: ClaimRecord,
    reruns: tuple[RerunRecord, ...],
    verdict: Mapping[str, Any] | None,
) -> RecheckEntry:
    status = "queued" if verdict is None else verdict["status"]
    command = recheck_command(head.snapshot_id, claim.scope, [obligation_id])
    if status == "queued":
        next_step = f"wait: poll batch_status {head.batch_id} (`byte-probe recheck` waits)"
    elif status == "disagreed":
        bad = next(r for r in reruns if not r.agrees)
        found = {"receipt": bad.receipt_sha256, "outcome": bad.outcome, "reason": bad.reason}
        next_step = after_disagreement(
            obligation_id, claim.claim_id, claim.outcome, {**found, "why": bad.why}, command
        )
    elif status == "already_resolved":
        next_step = "nothing: it was resolved while the reruns ran"
    else:
        next_step = "nothing: resolved rechecked"
    return RecheckEntry(
        obligation_id=obligation_id,
        claim_id=claim.claim_id,
        scope=claim.scope,
        statement=claim.statement,
        claim_outcome=claim.outcome,
        status=status,
        reruns=reruns,
        next=next_step,
    )
