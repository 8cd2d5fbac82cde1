"""``obligation_recheck``: rerun the evidence of open obligations' claims on their snapshot.

docs/ARCHITECTURE.md, "Recheck": for each open obligation on the target snapshot (in a
scope, or the ones named) the claim's rerunnable evidence (``reruns``) becomes new plans —
the same plans with only ``snapshot_id`` changed — and one batch of queued runs, persisted
with the recheck's rows in one transaction; the queue part executes them and the batch
settles when its last run is done (``settle``). Refusals come before any write: an
obligation already resolved, of another scope or snapshot, or (named) whose claim has
nothing to rerun. Swept without names, such a claim is listed as needing a person or an
agent, with what it rests on.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import Connection, insert, select

from ..errors import Conflict, InvalidInput, LimitExceeded, NotFound, NotRerunnable
from ..plans.models import plan_id_of
from ..store import Store, append_event, utc_now
from .audit import append_audit
from .digests import digest_json
from .gating import check_live_claims
from .next_steps import by_hand
from .receipts import ReceiptLookup
from .recheck_records import (
    NEEDS_PERSON,
    PersistRuns,
    RecheckEntry,
    RecheckReport,
    RerunRecord,
    RunLookup,
)
from .records import ClaimRecord, Obligation
from .reruns import ClaimReruns, claim_reruns
from .resolutions import list_in
from .rows import load_claims
from .scopes import require_claims_in_scope
from .settle import count_statuses, settle_recheck
from .sources import SnapshotSource
from .tables import recheck_items, recheck_settlements, rechecks

__all__ = ["MAX_RECHECK_RUNS", "batches_under_way", "obligation_recheck", "queued_run_ids"]

#: Most reruns one recheck queues (one transaction); more is refused, naming the limit.
MAX_RECHECK_RUNS = 1000


def obligation_recheck(
    store: Store,
    snapshot_id: str,
    *,
    scope: str | None = None,
    obligation_ids: Sequence[str] = (),
    receipts: ReceiptLookup,
    runs: RunLookup,
    persist: PersistRuns,
    interface: str = "python",
    requested_by: str | None = None,
) -> RecheckReport:
    """Queue the reruns of every open obligation on ``snapshot_id`` (in ``scope``, or the
    ``obligation_ids`` named) and return the report; the batch settles when its runs end.

    An earlier recheck of the snapshot whose runs are all done is settled first; one whose
    runs still run is reported ``under_way``, not queued again. Raises, writing nothing:
    NotFound (the snapshot); InvalidInput (a scope without a live claim; a named obligation
    of another scope or snapshot); Conflict (a named obligation already resolved);
    NotRerunnable (a named obligation whose claim has nothing to rerun); LimitExceeded
    (more than MAX_RECHECK_RUNS reruns). StoreUnavailable.
    """
    source = SnapshotSource(store)
    source.require(snapshot_id, "snapshot_id")
    named = list(dict.fromkeys(obligation_ids))
    if named:
        with store.reading() as conn:
            require_claims_in_scope(conn, scope)
    else:
        # A sweep owes what the gate would: every live claim in scope is checked first and
        # an obligation opened for each one not current (a scope without one is refused).
        check_live_claims(store, snapshot_id, scope, interface=interface, source=source)
    with store.reading() as conn:
        selected = _select(conn, snapshot_id, scope, named)
    reruns = _reruns(store, selected, snapshot_id, named)
    total = sum(len(r.reruns) for r in reruns.values())
    if total > MAX_RECHECK_RUNS:
        raise LimitExceeded(
            f"obligation_ids: {total} reruns, more than the {MAX_RECHECK_RUNS} one recheck "
            "queues; name fewer obligations (--obligation) or a narrower --scope"
        )
    under_way = _settle_earlier(store, snapshot_id, selected, runs, receipts, interface)
    with store.reading() as conn:
        # The settlement above may have resolved some: only what is still open is rerun.
        still = {o.obligation_id for o in list_in(conn, snapshot_id=snapshot_id, state="open")}
        claims = load_claims(conn, [o.claim_id for o in selected])
    todo = [o for o in selected if o.obligation_id in still and o.obligation_id not in under_way]
    queued = [o for o in todo if reruns[o.obligation_id].reruns]
    batch_id = uuid.uuid4().hex if queued else None
    records: dict[str, tuple[RerunRecord, ...]] = {}
    if batch_id is not None:
        records = _persist(
            store, batch_id, snapshot_id, scope, queued, reruns, persist, interface, requested_by
        )
    entries = [
        _entry(o, claims[o.claim_id], reruns[o.obligation_id], records, under_way, batch_id, still)
        for o in selected
    ]
    return RecheckReport(
        batch_id=batch_id,
        snapshot_id=snapshot_id,
        scope=scope,
        settled=batch_id is None,
        entries=tuple(entries),
        counts=count_statuses(entries),
    )


def queued_run_ids(report: RecheckReport) -> list[str]:
    """The runs a recheck's report says it queued, in order (what the queue is sent)."""
    return [r.run_id for e in report.entries if e.status == "queued" for r in e.reruns]


def batches_under_way(report: RecheckReport) -> list[str]:
    """The batches of earlier rechecks the report's ``under_way`` entries wait for."""
    return sorted({e.batch_id for e in report.entries if e.status == "under_way" and e.batch_id})


def _select(
    conn: Connection, snapshot_id: str, scope: str | None, named: Sequence[str]
) -> list[Obligation]:
    """The obligations to recheck: every open one on the snapshot (in scope), or the named
    ones, each of which must be open, of the scope and on the snapshot."""
    if not named:
        return list_in(conn, scope=scope, snapshot_id=snapshot_id, state="open")
    selected: list[Obligation] = []
    for i, obligation_id in enumerate(named):
        where = f"obligation_ids[{i}]: {obligation_id}"
        found = list_in(conn, obligation_id=obligation_id)
        if not found:
            raise NotFound(f"{where}: no such obligation")
        o = found[0]
        if scope is not None and o.scope != scope:
            raise InvalidInput(f"{where} is in scope {o.scope!r}, not in scope {scope!r}")
        if o.snapshot_id != snapshot_id:
            raise InvalidInput(
                f"{where} is owed on snapshot {o.snapshot_id}, not on {snapshot_id}; "
                "recheck it on its own snapshot"
            )
        if o.state == "resolved":
            raise Conflict(f"{where} is already resolved ({o.resolution}); nothing to recheck")
        selected.append(o)
    return selected


def _reruns(
    store: Store, selected: Sequence[Obligation], snapshot_id: str, named: Sequence[str]
) -> dict[str, ClaimReruns]:
    """Each selected obligation's reruns; a named one with none is refused."""
    with store.reading() as conn:
        claims = load_claims(conn, [o.claim_id for o in selected])
    found: dict[str, ClaimReruns] = {}
    for o in selected:
        reruns = claim_reruns(store, claims[o.claim_id], snapshot_id)
        if not reruns.reruns and o.obligation_id in named:
            i = named.index(o.obligation_id)
            rests = "; ".join(reruns.skipped + reruns.rests_on)
            raise NotRerunnable(
                f"obligation_ids[{i}]: {o.obligation_id}: claim {o.claim_id} has no evidence "
                f"the service can run again ({NEEDS_PERSON}); it rests on: {rests}"
            )
        found[o.obligation_id] = reruns
    return found


def _settle_earlier(
    store: Store,
    snapshot_id: str,
    selected: Sequence[Obligation],
    runs: RunLookup,
    receipts: ReceiptLookup,
    interface: str,
) -> dict[str, str]:
    """Settle the unsettled earlier rechecks of the selected obligations whose runs are
    done; return the obligations whose earlier recheck still runs, with its batch."""
    ids = [o.obligation_id for o in selected]
    ri, rs = recheck_items.c, recheck_settlements.c
    with store.reading() as conn:
        rows = conn.execute(
            select(ri.batch_id, ri.obligation_id)
            .join(rechecks, rechecks.c.batch_id == ri.batch_id)
            .where(rechecks.c.snapshot_id == snapshot_id, ri.obligation_id.in_(ids))
            .where(ri.batch_id.not_in(select(rs.batch_id)))
        ).all()
    under_way: dict[str, str] = {}
    for batch_id in sorted({row.batch_id for row in rows}):
        report = settle_recheck(
            store, batch_id, runs(batch_id), receipts, settled_by=f"recheck via {interface}"
        )
        if report is not None and not report.settled:
            under_way.update(
                {row.obligation_id: batch_id for row in rows if row.batch_id == batch_id}
            )
    return under_way


def _persist(
    store: Store,
    batch_id: str,
    snapshot_id: str,
    scope: str | None,
    queued: Sequence[Obligation],
    reruns: dict[str, ClaimReruns],
    persist: PersistRuns,
    interface: str,
    requested_by: str | None,
) -> dict[str, tuple[RerunRecord, ...]]:
    """Plans, runs and the recheck's rows in one transaction; the reruns by obligation."""
    pairs = [(o, r) for o in queued for r in reruns[o.obligation_id].reruns]
    with store.transaction() as conn:
        run_ids = persist(conn, batch_id, [(r.plan, r.policy_id) for _, r in pairs])
        conn.execute(
            insert(rechecks).values(
                batch_id=batch_id,
                snapshot_id=snapshot_id,
                scope=scope,
                interface=interface,
                requested_by=requested_by,
                requested_at=utc_now(),
            )
        )
        items = [
            {
                "batch_id": batch_id,
                "position": i,
                "obligation_id": o.obligation_id,
                "claim_id": o.claim_id,
                "evidence_kind": r.evidence_kind,
                "evidence": r.evidence,
                "plan_id": plan_id_of(r.plan),
                "policy_id": r.policy_id,
                "run_id": run_id,
            }
            for i, ((o, r), run_id) in enumerate(zip(pairs, run_ids, strict=True))
        ]
        conn.execute(insert(recheck_items), items)
        obligation_ids = [o.obligation_id for o in queued]
        append_event(
            conn, "recheck", batch_id, {"snapshot_id": snapshot_id, "obligations": obligation_ids}
        )
        for group_scope in sorted({o.scope for o in queued}):
            group = [o.obligation_id for o in queued if o.scope == group_scope]
            append_audit(
                conn,
                operation="obligation_recheck",
                interface=interface,
                scope=group_scope,
                subject_ids=group,
                before=None,
                after=digest_json([i for i in items if i["obligation_id"] in group]),
            )
    records: dict[str, list[RerunRecord]] = {}
    for item in items:
        records.setdefault(str(item["obligation_id"]), []).append(
            RerunRecord(
                evidence_kind=item["evidence_kind"],
                evidence=str(item["evidence"]),
                plan_id=str(item["plan_id"]),
                policy_id=str(item["policy_id"]),
                run_id=str(item["run_id"]),
            )
        )
    return {k: tuple(v) for k, v in records.items()}


def _entry(
    obligation: Obligation,
    claim: ClaimRecord,
    reruns: ClaimReruns,
    records: dict[str, tuple[RerunRecord, ...]],
    under_way: dict[str, str],
    batch_id: str | None,
    still_open: set[str],
) -> RecheckEntry:
    oid = obligation.obligation_id
    base = {
        "obligation_id": oid,
        "claim_id": claim.claim_id,
        "scope": claim.scope,
        "statement": claim.statement,
        "claim_outcome": claim.outcome,
        "skipped": reruns.skipped,
    }
    if oid not in still_open:
        return RecheckEntry(
            **base, status="already_resolved", next="nothing: resolved by an earlier recheck"
        )
    if oid in under_way:
        return RecheckEntry(
            **base,
            status="under_way",
            batch_id=under_way[oid],
            next=f"wait: an earlier recheck runs it (poll batch_status {under_way[oid]})",
        )
    if oid in records:
        return RecheckEntry(
            **base,
            status="queued",
            reruns=records[oid],
            batch_id=batch_id,
            next=f"wait: poll batch_status {batch_id} (`byte-probe recheck` waits)",
        )
    return RecheckEntry(
        **base,
        status="needs_person",
        rests_on=reruns.rests_on,
        next=by_hand(oid, claim.claim_id),
    )
