"""A batch at a glance, read-only: its counts and progress, its slowest runs, its failures.

The web view's batch page (docs/ARCHITECTURE.md, "Web view") reads this through the
``batch_report`` row. Unlike ``batch_status`` it settles nothing and lists no more than
``limit`` runs of each kind, so a 100,000-run batch costs a few indexed statements: counts
by state and outcome, the ``limit`` runs that took longest from submission to done, and
the first ``limit`` runs (in submission order) that did not support their hypothesis.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy import Connection, func, select

from ..errors import NotFound
from ..store import Store
from .listing import plan_hypotheses
from .tables import runs

__all__ = ["BatchReport", "BatchRun", "batch_report"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class BatchRun(_Frozen):
    """One run of a batch as its page lists it."""

    run_id: str
    seq: int
    hypothesis: str | None
    state: str
    outcome: str | None
    reason: str | None
    attempts: int
    receipt_sha256: str | None
    #: Submission to done, in milliseconds (None while not done).
    took_ms: int | None


class BatchReport(_Frozen):
    """Counts, progress, the slowest runs and the failures of one batch."""

    batch_id: str
    total: int
    done: int
    #: Runs by state (queued, running, done) and done runs by outcome.
    counts: dict[str, int]
    #: Runs taken more than once (a worker was lost on an earlier attempt).
    reattempted: int
    submitted_ms: int | None
    last_finished_ms: int | None
    slowest: list[BatchRun]
    #: Done runs whose outcome is not ``supports``, in submission order.
    failures: list[BatchRun]
    failures_total: int


def batch_report(store: Store, batch_id: str, *, limit: int = 10) -> BatchReport:
    """The report of batch ``batch_id``.

    Raises NotFound when the batch has no run, StoreUnavailable when the store fails.
    """
    failed = (runs.c.state == "done") & (runs.c.outcome != "supports")
    with store.reading() as conn:
        counts: dict[str, int] = {}
        for state, outcome, n in conn.execute(
            select(runs.c.state, runs.c.outcome, func.count())
            .where(runs.c.batch_id == batch_id)
            .group_by(runs.c.state, runs.c.outcome)
        ):
            counts[state] = counts.get(state, 0) + n
            if outcome:
                counts[outcome] = counts.get(outcome, 0) + n
        total = sum(counts.get(s, 0) for s in ("queued", "running", "done"))
        if not total:
            raise NotFound(f"batch_id: no batch {batch_id!r} in the store")
        summary = conn.execute(
            select(
                func.min(runs.c.submitted_ms),
                func.max(runs.c.finished_ms),
                func.count().filter(runs.c.attempts > 1),
                func.count().filter(failed),
            ).where(runs.c.batch_id == batch_id)
        ).one()
        took = runs.c.finished_ms - runs.c.submitted_ms
        slowest = _runs(
            conn,
            select(runs)
            .where(runs.c.batch_id == batch_id, runs.c.state == "done")
            .order_by(took.desc(), runs.c.seq)
            .limit(limit),
        )
        failures = _runs(
            conn,
            select(runs)
            .where(runs.c.batch_id == batch_id, failed)
            .order_by(runs.c.seq)
            .limit(limit),
        )
    return BatchReport(
        batch_id=batch_id,
        total=total,
        done=counts.get("done", 0),
        counts=counts,
        reattempted=int(summary[2]),
        submitted_ms=summary[0],
        last_finished_ms=summary[1],
        slowest=slowest,
        failures=failures,
        failures_total=int(summary[3]),
    )


def _runs(conn: Connection, query: Any) -> list[BatchRun]:
    rows = conn.execute(query).all()
    named = plan_hypotheses(conn, [r.plan_id for r in rows])
    return [
        BatchRun(
            run_id=r.run_id,
            seq=r.seq,
            hypothesis=named.get(r.plan_id),
            state=r.state,
            outcome=r.outcome,
            reason=r.reason,
            attempts=r.attempts,
            receipt_sha256=r.receipt_sha256,
            took_ms=None if r.finished_ms is None else r.finished_ms - r.submitted_ms,
        )
        for r in rows
    ]
