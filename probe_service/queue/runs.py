"""The run lifecycle in the store: create, claim with a lease, heartbeat, finish, reap.

Every transition is a conditional UPDATE, so any number of workers and janitors on any
number of machines can race on the same row and exactly one wins.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Update, and_, delete, exists, func, insert, or_, select, update

from ..errors import NotFound
from ..plans.tables import receipts
from ..store import Store
from ..store.referents import gc_removed, hold_referents
from .tables import DEFAULT_NAMESPACE, pending_confirmations, runs

__all__ = [
    "Claim",
    "RunRow",
    "batch_counts",
    "cancel_run",
    "claim_run",
    "create_runs",
    "expired_runs",
    "finish_run",
    "finish_run_in",
    "lease_update",
    "mark_enqueued",
    "new_run_rows",
    "now_ms",
    "renew_lease",
    "requeue_run",
    "stale_queued_runs",
]


def now_ms() -> int:
    """Wall-clock milliseconds; leases are compared across machines, so not monotonic."""
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class RunRow:
    """The fields of a run a worker needs."""

    run_id: str
    plan_id: str
    policy_id: str
    state: str
    attempts: int
    #: False when the submitter asked for a fresh execution (``--no-reuse``).
    reuse: bool = True
    #: Seconds from submission to this claim (the receipt's ``queued`` phase).
    queued_seconds: float | None = None


@dataclass(frozen=True)
class Claim:
    """The answer to a claim: ``run`` when this worker now holds the lease."""

    run: RunRow | None
    why: str


def new_run_rows(
    batch_id: str,
    start: int,
    items: Sequence[tuple[str, str]],
    *,
    namespace: str,
    reuse: bool = True,
) -> list[dict[str, object]]:
    """Rows for new queued runs of ``(plan_id, policy_id)`` on queue ``namespace``, numbered
    from ``start``; ``reuse=False`` asks the worker to execute even when a reusable receipt
    exists."""
    submitted = now_ms()
    return [
        {
            "run_id": uuid.uuid4().hex,
            "batch_id": batch_id,
            "seq": start + i,
            "plan_id": plan_id,
            "policy_id": policy_id,
            "state": "queued",
            "attempts": 0,
            "submitted_ms": submitted,
            "reuse": reuse,
            "namespace": namespace,
        }
        for i, (plan_id, policy_id) in enumerate(items)
    ]


def create_runs(
    store: Store,
    batch_id: str,
    items: Sequence[tuple[str, str]],
    *,
    namespace: str = DEFAULT_NAMESPACE,
) -> list[str]:
    """Insert one queued run per ``(plan_id, policy_id)`` on queue ``namespace``; return the
    new run ids in order."""
    rows = new_run_rows(batch_id, 0, items, namespace=namespace)
    if rows:
        with store.transaction() as conn:
            conn.execute(insert(runs), rows)
    return [str(r["run_id"]) for r in rows]


def mark_enqueued(store: Store, run_ids: Sequence[str]) -> None:
    """Record when runs' messages were handed to the broker (the janitor re-sends late ones)."""
    with store.transaction() as conn:
        conn.execute(
            update(runs)
            .where(runs.c.run_id.in_(list(run_ids)), runs.c.state == "queued")
            .values(enqueued_ms=now_ms())
        )


def claim_run(
    store: Store,
    run_id: str,
    owner: str,
    lease_ms: int,
    *,
    count_attempt: bool = True,
    namespace: str = DEFAULT_NAMESPACE,
) -> Claim:
    """Take the lease on a queued run (or one whose lease expired) and count the attempt.

    The janitor claims without counting when it only means to close a run for good. A run
    submitted to another queue namespace is refused (``other_namespace``) and left as it
    was: only its own namespace's workers execute it (docs/ARCHITECTURE.md, "Queue
    namespaces").
    """
    now = now_ms()
    with store.transaction() as conn:
        row = conn.execute(select(runs).where(runs.c.run_id == run_id)).first()
        if row is None:
            return Claim(None, "unknown_run")
        if row.namespace != namespace:
            return Claim(None, "other_namespace")
        if row.state == "done":
            return Claim(None, "already_done")
        if row.state == "running" and (row.lease_expires_ms or 0) > now:
            return Claim(None, "leased_elsewhere")
        claimed = conn.execute(
            lease_update(row, namespace, owner, now + lease_ms, count_attempt=count_attempt)
        ).rowcount
    if claimed != 1:
        return Claim(None, "lost_race")
    attempts = row.attempts + int(count_attempt)
    reuse = row.reuse is not False
    queued = None if row.submitted_ms is None else (now - row.submitted_ms) / 1000
    claimed_row = RunRow(run_id, row.plan_id, row.policy_id, "running", attempts, reuse, queued)
    return Claim(claimed_row, "claimed")


def lease_update(
    row: Any, namespace: str, owner: str, expires_ms: int, *, count_attempt: bool = True
) -> Update:
    """The conditional UPDATE that leases the run ``row`` was read as to ``owner``: it
    matches only while the run is still as read, so of racers that read it one wins."""
    return (
        update(runs)
        .where(
            runs.c.run_id == row.run_id,
            runs.c.namespace == namespace,
            runs.c.state == row.state,
            runs.c.attempts == row.attempts,
            # A janitor's claim leaves attempts as they were, so state and attempts alone
            # let every racer that read the expired row win; the lease it read must hold.
            runs.c.lease_expires_ms.is_not_distinct_from(row.lease_expires_ms),
        )
        .values(
            state="running",
            attempts=row.attempts + int(count_attempt),
            lease_owner=owner,
            lease_expires_ms=expires_ms,
        )
    )


def renew_lease(store: Store, run_id: str, owner: str, lease_ms: int) -> bool:
    """Extend this owner's lease; False when it no longer holds it."""
    with store.transaction() as conn:
        return (
            conn.execute(
                update(runs)
                .where(
                    runs.c.run_id == run_id, runs.c.state == "running", runs.c.lease_owner == owner
                )
                .values(lease_expires_ms=now_ms() + lease_ms)
            ).rowcount
            == 1
        )


def finish_run(
    store: Store,
    run_id: str,
    *,
    outcome: str,
    reason: str,
    receipt_sha256: str | None,
    action_key: str | None,
    reused: bool | None = None,
) -> bool:
    """Mark a run done (once); False when it was already done.

    Retried when the connection drops (a second attempt finds the run done).
    """
    return store.retrying(
        lambda conn: finish_run_in(
            conn,
            run_id,
            outcome=outcome,
            reason=reason,
            receipt_sha256=receipt_sha256,
            action_key=action_key,
            reused=reused,
        ),
        what=f"finish run {run_id}",
    )


def finish_run_in(
    conn: Connection,
    run_id: str,
    *,
    outcome: str,
    reason: str,
    receipt_sha256: str | None,
    action_key: str | None,
    reused: bool | None = None,
) -> bool:
    """``finish_run`` inside the caller's transaction (the receipt's own, on the lean path).

    A refutation the run was waiting to confirm goes with it (docs/ARCHITECTURE.md,
    "Confirming a refutation"): whatever finished the run, nothing is left to confirm.
    Raises NotFound when the run reused a receipt gc removed after the reuse lookup read
    it (docs/ARCHITECTURE.md, "Retention and gc"): the run stays unfinished, and its next
    attempt misses and executes.
    """
    if (
        reused
        and receipt_sha256 is not None
        and not hold_referents(conn, receipts.c.receipt_sha256, [receipt_sha256])
        and gc_removed(conn, "receipts")
    ):
        raise NotFound(f"run {run_id}: reused receipt {receipt_sha256} is no longer stored (gc)")
    finished = (
        conn.execute(
            update(runs)
            .where(runs.c.run_id == run_id, runs.c.state != "done")
            .values(
                state="done",
                outcome=outcome,
                reason=reason,
                receipt_sha256=receipt_sha256,
                action_key=action_key,
                reused=reused,
                lease_owner=None,
                lease_expires_ms=None,
                finished_ms=now_ms(),
            )
        ).rowcount
        == 1
    )
    if finished:
        conn.execute(delete(pending_confirmations).where(pending_confirmations.c.run_id == run_id))
    return finished


def requeue_run(store: Store, run_id: str) -> bool:
    """Put a running run whose lease expired back to queued; False if someone else did."""
    with store.transaction() as conn:
        return (
            conn.execute(
                update(runs)
                .where(
                    runs.c.run_id == run_id,
                    runs.c.state == "running",
                    runs.c.lease_expires_ms < now_ms(),
                )
                .values(state="queued", lease_owner=None, lease_expires_ms=None, enqueued_ms=None)
            ).rowcount
            == 1
        )


def expired_runs(store: Store, namespace: str, limit: int = 500) -> list[RunRow]:
    """Runs of queue ``namespace`` whose worker stopped renewing its lease."""
    with store.reading() as conn:
        rows = conn.execute(
            select(runs)
            .where(
                runs.c.namespace == namespace,
                runs.c.state == "running",
                runs.c.lease_expires_ms < now_ms(),
            )
            .limit(limit)
        )
        return [RunRow(r.run_id, r.plan_id, r.policy_id, r.state, r.attempts) for r in rows]


def stale_queued_runs(
    store: Store, namespace: str, older_than_ms: int, limit: int = 1000
) -> list[str]:
    """Queued runs of queue ``namespace`` whose message was never sent, or sent long ago
    and never claimed; runs of other namespaces are never theirs to re-send."""
    cutoff = now_ms() - older_than_ms
    with store.reading() as conn:
        rows = conn.execute(
            select(runs.c.run_id)
            .where(
                runs.c.namespace == namespace,
                runs.c.state == "queued",
                or_(
                    and_(runs.c.enqueued_ms.is_(None), runs.c.submitted_ms < cutoff),
                    runs.c.enqueued_ms < cutoff,
                ),
            )
            .limit(limit)
        )
        return [r.run_id for r in rows]


def batch_counts(store: Store, batch_id: str) -> dict[str, int]:
    """Counts of a batch's runs by state, and of its done runs by outcome."""
    with store.reading() as conn:
        rows = conn.execute(
            select(runs.c.state, runs.c.outcome, func.count())
            .where(runs.c.batch_id == batch_id)
            .group_by(runs.c.state, runs.c.outcome)
        )
        counts: dict[str, int] = {}
        for state, outcome, n in rows:
            counts[state] = counts.get(state, 0) + n
            if outcome:
                counts[outcome] = counts.get(outcome, 0) + n
        return counts


def cancel_run(store: Store, run_id: str) -> str:
    """Close a queued run as ``inconclusive``/``cancelled`` before any worker takes it.

    Returns the run's state before the call: ``queued`` when it was cancelled; ``running``
    or ``done`` when it was left alone; ``unknown`` when no such run exists. A worker's
    claim finds the run done and never executes it (docs/ARCHITECTURE.md, "The flow of one probe").
    A run queued again to confirm its refutation was taken already: it counts as
    ``running`` and is left alone (docs/ARCHITECTURE.md, "Confirming a refutation").
    """
    waiting = exists().where(pending_confirmations.c.run_id == run_id)
    with store.transaction() as conn:
        cancelled = conn.execute(
            update(runs)
            .where(runs.c.run_id == run_id, runs.c.state == "queued", ~waiting)
            .values(state="done", outcome="inconclusive", reason="cancelled", finished_ms=now_ms())
        ).rowcount
        if cancelled:
            return "queued"
        state = conn.execute(select(runs.c.state).where(runs.c.run_id == run_id)).scalar()
        if state == "queued":
            return "running"  # queued again for its confirmation
    return str(state) if state is not None else "unknown"
