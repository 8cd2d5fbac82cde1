"""Refutations waiting, queued again, for their confirmation on another worker
(docs/ARCHITECTURE.md, "Confirming a refutation").

The run stays one run: its row goes from ``running`` back to ``queued`` with its first
execution's receipt fields stored beside it, in one conditional transaction, and the next
claim executes the confirmation. Finishing the run deletes the stored fields in the same
transaction (``runs.finish_run_in``), so a run is never finished twice and never left
holding a refutation nobody will confirm.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy import select, update

from ..errors import ReceiptInvalid
from ..plans.confirm import ReceiptDraft
from ..store import Store, insert_on_conflict
from .runs import now_ms
from .tables import pending_confirmations, runs

__all__ = [
    "PendingConfirmation",
    "pending_confirmation",
    "requeue_for_confirmation",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PendingConfirmation:
    """A queued run's first refutation and the worker that executed it."""

    first_worker: str
    draft: ReceiptDraft
    created_ms: int


def requeue_for_confirmation(store: Store, run_id: str, owner: str, draft: ReceiptDraft) -> bool:
    """Put the run ``owner`` holds back in the queue with ``draft``, its first refutation,
    to wait for a confirmation. Attempts start again: they count the claims of the
    execution under way (the first, then the confirmation).

    Returns False, writing nothing, when ``owner`` no longer holds the run's lease (the
    janitor gave the run to another worker, which executes it from the start).
    """
    with store.transaction() as conn:
        moved = conn.execute(
            update(runs)
            .where(runs.c.run_id == run_id, runs.c.state == "running", runs.c.lease_owner == owner)
            .values(
                state="queued",
                attempts=0,
                lease_owner=None,
                lease_expires_ms=None,
                enqueued_ms=None,
            )
        ).rowcount
        if moved != 1:
            return False
        row = {"first_worker": owner, "draft": draft.to_json(), "created_ms": now_ms()}
        # A worker that claimed the run before it saw an earlier hand-off executed it anew:
        # its refutation is the one the run now waits to confirm.
        conn.execute(
            insert_on_conflict(conn, pending_confirmations)
            .values(run_id=run_id, **row)
            .on_conflict_do_update(index_elements=["run_id"], set_=row)
        )
    return True


def pending_confirmation(store: Store, run_id: str) -> PendingConfirmation | None:
    """The first refutation the run waits to confirm, or None (also when the stored fields
    are not a receipt draft: nothing unreadable is confirmed, the run executes anew)."""
    pending = pending_confirmations.c
    with store.reading() as conn:
        row = conn.execute(
            select(pending.first_worker, pending.draft, pending.created_ms).where(
                pending.run_id == run_id
            )
        ).first()
    if row is None:
        return None
    try:
        draft = ReceiptDraft.from_json(row.draft)
    except ReceiptInvalid as exc:
        log.warning("run %s: %s; executing it anew", run_id, exc)
        return None
    return PendingConfirmation(row.first_worker, draft, row.created_ms)
