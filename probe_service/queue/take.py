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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, select, update

from ..errors import ReceiptInvalid
from ..plans.confirm import ReceiptDraft
from ..plans.persist import find_reusable_receipt, load_reusable_receipt
from ..plans.receipt_model import Receipt
from ..plans.tables import plans, receipts
from ..store import Store
from .confirmations import PendingConfirmation
from .runs import Claim, RunRow, now_ms
from .tables import DEFAULT_NAMESPACE, pending_confirmations, runs

__all__ = ["REUSE_CANDIDATES", "TakenRun", "Taking", "reuse_lookup", "take_run"]

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

    @property
    def claim(self) -> Claim:
        """The same answer as ``runs.claim_run`` gives."""
        return Claim(None if self.taken is None else self.taken.run, self.why)


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
        row = conn.execute(_run_with_plan(run_id)).first()
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
        claimed = conn.execute(
            update(runs)
            .where(
                runs.c.run_id == run_id,
                runs.c.namespace == namespace,
                runs.c.state == row.state,
                runs.c.attempts == row.attempts,
                runs.c.lease_expires_ms.is_not_distinct_from(row.lease_expires_ms),
            )
            .values(
                state="running",
                attempts=row.attempts + 1,
                lease_owner=owner,
                lease_expires_ms=expires,
            )
        ).rowcount
        if claimed != 1:
            return Taking(None, "lost_race")
        return _taken(conn, row, row.attempts + 1, now, pending)

    return store.retrying(body, what=f"take run {run_id}")


def _run_with_plan(run_id: str) -> Any:
    """The run's row with its plan's body and its pending confirmation, in one statement."""
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
        .where(runs.c.run_id == run_id)
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
        candidates = tuple(
            (found.action_key, found.run_id)
            for found in conn.execute(
                select(receipts.c.action_key, receipts.c.run_id)
                .where(
                    receipts.c.plan_id == row.plan_id,
                    receipts.c.reusable.is_(True),
                    receipts.c.outcome != "inconclusive",
                )
                .order_by(receipts.c.created_at.desc(), receipts.c.receipt_sha256.desc())
                .limit(REUSE_CANDIDATES)
            )
        )
    return Taking(TakenRun(run, row.plan_body, pending, candidates), "claimed", pending)


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
