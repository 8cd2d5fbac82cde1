"""Taking a queued run: the lease, the run's plan, its pending confirmation and the receipts
that could answer it, all in one transaction (docs/ARCHITECTURE.md, "Lean store path").

Between taking a run and finishing it a worker touches the store no more: the plan body
comes with the lease, and so do the keys of the plan's reusable receipts, so the reuse
check needs no lookup of its own unless one matches. A claim whose commit answer was lost
is recognised by its retry (the same owner and the lease expiry it wrote), so
reconnect-and-retry never leaves a run leased to nobody.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, func, select, update

from ..errors import ReceiptInvalid
from ..plans.confirm import ReceiptDraft
from ..plans.persist import find_reusable_receipt, load_reusable_receipt
from ..plans.receipt_model import Receipt
from ..plans.tables import plans, receipts
from ..store import Store
from .confirmations import PendingConfirmation
from .runs import RunRow, lease_update, now_ms
from .tables import DEFAULT_NAMESPACE, pending_confirmations, runs

__all__ = [
    "REUSE_CANDIDATES",
    "TakenRun",
    "Taking",
    "reuse_lookup",
    "take_run",
    "take_runs",
]

log = logging.getLogger(__name__)

#: How many of a plan's newest reusable receipts come with its lease. A plan's receipts
#: differ by action key only when its policy, environment, executable or sandbox changed,
#: so a handful covers every worker of a farm; with this many or more the reuse check
#: asks the store itself when none matches.
REUSE_CANDIDATES = 16

#: Decides, inside the taking transaction, that a run waiting to confirm this worker's own
#: refutation is left to another worker: called with the worker that refuted first.
LeaveToOther = Callable[[str], bool]


@dataclass(frozen=True)
class TakenRun:
    """What came with a lease: the run, its plan's stored body, its pending confirmation,
    and ``(action_key, run_id)`` of the plan's newest reusable receipts."""

    run: RunRow
    plan_body: str | None
    pending: PendingConfirmation | None = None
    candidates: tuple[tuple[str, str], ...] = field(default=())

    @property
    def candidates_complete(self) -> bool:
        """Whether ``candidates`` holds every reusable receipt of the plan."""
        return len(self.candidates) < REUSE_CANDIDATES


@dataclass(frozen=True)
class Taking:
    """The answer of ``take_run``: ``taken`` when this worker now holds the lease."""

    taken: TakenRun | None
    why: str
    pending: PendingConfirmation | None = None


def take_run(
    store: Store,
    run_id: str,
    owner: str,
    lease_ms: int,
    *,
    namespace: str = DEFAULT_NAMESPACE,
    leave_to_other: LeaveToOther | None = None,
) -> Taking:
    """Take the lease on a queued run (or one whose lease expired), count the attempt and
    read what running it needs, in one transaction retried when the connection drops.

    Refuses like ``runs.claim_run`` (``unknown_run``, ``other_namespace``,
    ``already_done``, ``leased_elsewhere``, ``lost_race``), and ``confirm_elsewhere``
    when ``leave_to_other`` keeps the run for another worker (nothing is written then).
    Raises StoreUnavailable when the store stays unreachable.
    """
    now = now_ms()
    expires = now + lease_ms

    def body(conn: Connection) -> Taking:
        row = conn.execute(_runs_with_plans([run_id])).first()
        if row is None:
            return Taking(None, "unknown_run")
        if row.namespace != namespace:
            return Taking(None, "other_namespace")
        if row.state == "running" and row.lease_owner == owner and row.lease_expires_ms == expires:
            return _taken(conn, row, row.attempts, now, _pending(row))  # our own lost commit
        if row.state == "done":
            return Taking(None, "already_done")
        if row.state == "running" and (row.lease_expires_ms or 0) > now:
            return Taking(None, "leased_elsewhere")
        pending = _pending(row)
        if pending and leave_to_other is not None and leave_to_other(pending.first_worker):
            return Taking(None, "confirm_elsewhere", pending)
        claimed = conn.execute(lease_update(row, namespace, owner, expires)).rowcount
        if claimed != 1:
            return Taking(None, "lost_race")
        return _taken(conn, row, row.attempts + 1, now, pending)

    return store.retrying(body, what=f"take run {run_id}")


def _runs_with_plans(run_ids: Sequence[str]) -> Any:
    """The runs' rows with their plans' bodies and pending confirmations, in one statement."""
    pending = pending_confirmations.c
    return (
        select(
            runs,
            plans.c.body.label("plan_body"),
            pending.first_worker,
            pending.draft,
            pending.created_ms,
        )
        .select_from(
            runs.outerjoin(plans, plans.c.plan_id == runs.c.plan_id).outerjoin(
                pending_confirmations, pending.run_id == runs.c.run_id
            )
        )
        .where(runs.c.run_id.in_(list(run_ids)))
    )


def _pending(row: Any) -> PendingConfirmation | None:
    """The row's pending confirmation, or None (also when the stored fields are not a
    receipt draft: nothing unreadable is confirmed, the run executes anew)."""
    if row.first_worker is None:
        return None
    try:
        draft = ReceiptDraft.from_json(row.draft)
    except ReceiptInvalid as exc:
        log.warning("run %s: %s; executing it anew", row.run_id, exc)
        return None
    return PendingConfirmation(row.first_worker, draft, row.created_ms)


def _taken(
    conn: Connection, row: Any, attempts: int, now: int, pending: PendingConfirmation | None
) -> Taking:
    """The lease's answer, with the plan's reusable receipt keys when reuse is allowed."""
    reuse = row.reuse is not False
    queued = None if row.submitted_ms is None else (now - row.submitted_ms) / 1000
    run = RunRow(row.run_id, row.plan_id, row.policy_id, "running", attempts, reuse, queued)
    candidates: tuple[tuple[str, str], ...] = ()
    if reuse and pending is None:
        candidates = _candidates(conn, [row.plan_id]).get(row.plan_id, ())
    return Taking(TakenRun(run, row.plan_body, pending, candidates), "claimed", pending)


def _attempts(rows: Any) -> dict[str, int]:
    """``run_id → attempts`` of rows holding those two columns."""
    return {str(run_id): int(attempts) for run_id, attempts in rows}


def _candidates(
    conn: Connection, plan_ids: Sequence[str]
) -> dict[str, tuple[tuple[str, str], ...]]:
    """``(action_key, run_id)`` of each plan's REUSE_CANDIDATES newest reusable receipts,
    newest first (the order ``find_reusable_receipt`` picks in), in one statement."""
    newest = (
        func.row_number()
        .over(
            partition_by=receipts.c.plan_id,
            order_by=(receipts.c.created_at.desc(), receipts.c.receipt_sha256.desc()),
        )
        .label("newest")
    )
    ranked = (
        select(receipts.c.plan_id, receipts.c.action_key, receipts.c.run_id, newest)
        .where(
            receipts.c.plan_id.in_(list(plan_ids)),
            receipts.c.reusable.is_(True),
            receipts.c.outcome != "inconclusive",
        )
        .subquery()
    )
    found: dict[str, list[tuple[str, str]]] = {}
    for row in conn.execute(
        select(ranked.c.plan_id, ranked.c.action_key, ranked.c.run_id)
        .where(ranked.c.newest <= REUSE_CANDIDATES)
        .order_by(ranked.c.plan_id, ranked.c.newest)
    ):
        found.setdefault(row.plan_id, []).append((row.action_key, row.run_id))
    return {plan_id: tuple(keys) for plan_id, keys in found.items()}


def take_runs(
    store: Store, run_ids: Sequence[str], owner: str, lease_ms: int, *, namespace: str
) -> list[TakenRun]:
    """Take every run of ``run_ids`` that is free (queued, or its lease expired) in one
    transaction of three statements, whatever their number; return those taken, in the
    order of ``run_ids``. The others are left as they are (done, leased elsewhere, another
    namespace's or unknown): whoever holds them finishes them.

    For a queue that hands a worker many runs at once (the embedded mode's batch);
    retried when the connection drops. Raises StoreUnavailable.
    """
    now = now_ms()
    expires = now + lease_ms
    wanted = list(dict.fromkeys(run_ids))
    free = (runs.c.state == "queued") | (
        (runs.c.state == "running") & (runs.c.lease_expires_ms < now)
    )

    def body(conn: Connection) -> list[TakenRun]:
        claimed = _attempts(
            conn.execute(
                update(runs)
                .where(runs.c.run_id.in_(wanted), runs.c.namespace == namespace, free)
                .values(
                    state="running",
                    attempts=runs.c.attempts + 1,
                    lease_owner=owner,
                    lease_expires_ms=expires,
                )
                .returning(runs.c.run_id, runs.c.attempts)
            )
        )
        # A retry after a commit whose answer was lost finds its own leases.
        if not claimed:
            claimed = _attempts(
                conn.execute(
                    select(runs.c.run_id, runs.c.attempts).where(
                        runs.c.run_id.in_(wanted),
                        runs.c.state == "running",
                        runs.c.lease_owner == owner,
                        runs.c.lease_expires_ms == expires,
                    )
                )
            )
        if not claimed:
            return []
        rows = {row.run_id: row for row in conn.execute(_runs_with_plans(list(claimed)))}
        reusing = [
            r.plan_id for r in rows.values() if r.reuse is not False and r.first_worker is None
        ]
        candidates = _candidates(conn, reusing) if reusing else {}
        taken = []
        for run_id in wanted:
            row = rows.get(run_id)
            if row is None:
                continue
            pending = _pending(row)
            queued = None if row.submitted_ms is None else (now - row.submitted_ms) / 1000
            reuse = row.reuse is not False
            run = RunRow(
                run_id, row.plan_id, row.policy_id, "running", claimed[run_id], reuse, queued
            )
            keys = candidates.get(row.plan_id, ()) if reuse and pending is None else ()
            taken.append(TakenRun(run, row.plan_body, pending, keys))
        return taken

    return store.retrying(body, what=f"take {len(wanted)} run(s)")


def reuse_lookup(store: Store, taken: TakenRun) -> Callable[[str], Receipt | None]:
    """The reuse check for a taken run: its candidates first, the store only for a match
    (to read the receipt that answers) or when the candidates may be incomplete."""

    def find(action_key: str) -> Receipt | None:
        for key, run_id in taken.candidates:
            if key == action_key:  # the newest receipt of this action, as the store orders
                return load_reusable_receipt(store, run_id)
        if taken.candidates_complete:
            return None
        return find_reusable_receipt(store, action_key)

    return find
