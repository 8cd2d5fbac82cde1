"""Read-only statistics of the probe farm, from the store (docs/ARCHITECTURE.md, "Web view").

The farm is the ``runs`` table: queue depth and runs by state are counted there, and the
runs that finished inside a window give outcomes, reasons, throughput and
submit-to-receipt latency per time bucket, in one range scan of a covering index
(migration ``0011_web_indexes``). Workers are those holding a lease now and those that
wrote one of the newest receipts (the worker name is an operational field of a receipt).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy import func, select

from ..plans.tables import receipts
from ..store import Store
from .runs import now_ms
from .tables import runs

__all__ = ["Bucket", "FarmStats", "WorkerSeen", "farm_stats"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


#: How many of the newest receipts are read for the worker names they carry.
WORKER_SAMPLE = 200


class Bucket(_Frozen):
    """Runs that finished in ``[start_ms, start_ms + width)``."""

    start_ms: int
    finished: int
    latency_avg_ms: float | None
    latency_max_ms: int | None


class WorkerSeen(_Frozen):
    """A worker and when it was last seen doing something."""

    worker: str
    last_seen: str
    running: int


class FarmStats(_Frozen):
    """What the farm page shows."""

    now_ms: int
    window_ms: int
    bucket_ms: int
    queue_depth: int
    by_state: dict[str, int]
    outcomes: dict[str, int]
    reasons: dict[str, int]
    buckets: list[Bucket]
    receipts_stored: int
    workers: list[WorkerSeen] = []


def farm_stats(store: Store, *, window_ms: int, buckets: int) -> FarmStats:
    """Statistics over the runs that finished in the last ``window_ms``.

    Raises StoreUnavailable when the store fails.
    """
    now = now_ms()
    width = max(1, window_ms // buckets)
    start = now - width * buckets
    with store.reading() as conn:
        by_state = {
            str(state): int(n)
            for state, n in conn.execute(select(runs.c.state, func.count()).group_by(runs.c.state))
        }
        # One range of the finished-time index per bucket: no sort, no temporary table.
        latency = runs.c.finished_ms - runs.c.submitted_ms
        series = [
            conn.execute(
                select(func.count(), func.sum(latency), func.max(latency)).where(
                    runs.c.finished_ms >= start + i * width,
                    runs.c.finished_ms < start + (i + 1) * width,
                )
            ).one()
            for i in range(buckets)
        ]
        # In the order of the (outcome, reason, finished) index: grouped without sorting.
        tallies = conn.execute(
            select(runs.c.outcome, runs.c.reason, func.count())
            .where(runs.c.finished_ms >= start)
            .group_by(runs.c.outcome, runs.c.reason)
        ).all()
        receipts_stored = int(conn.execute(select(func.count()).select_from(receipts)).scalar_one())
        holders = conn.execute(
            select(runs.c.lease_owner, func.count(), func.max(runs.c.lease_expires_ms))
            .where(runs.c.state == "running", runs.c.lease_owner.is_not(None))
            .group_by(runs.c.lease_owner)
        ).all()
        recent = conn.execute(
            select(receipts.c.body, receipts.c.created_at)
            .order_by(receipts.c.created_at.desc())
            .limit(WORKER_SAMPLE)
        ).all()
    return FarmStats(
        now_ms=now,
        window_ms=width * buckets,
        bucket_ms=width,
        queue_depth=by_state.get("queued", 0),
        by_state=by_state,
        outcomes=_tally(tallies, 0),
        reasons=_tally(tallies, 1),
        buckets=[
            Bucket(
                start_ms=start + i * width,
                finished=int(count),
                latency_avg_ms=(int(total) / int(count)) if count else None,
                latency_max_ms=None if longest is None else int(longest),
            )
            for i, (count, total, longest) in enumerate(series)
        ],
        receipts_stored=receipts_stored,
        workers=_workers(holders, recent),
    )


def _tally(rows: Sequence[Any], column: int) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in rows:
        key = str(row[column])
        counts[key] = counts.get(key, 0) + int(row[2])
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _workers(holders: Sequence[Any], recent: Sequence[Any]) -> list[WorkerSeen]:
    seen: dict[str, WorkerSeen] = {}
    for owner, count, _expires in holders:
        seen[str(owner)] = WorkerSeen(worker=str(owner), last_seen="now", running=int(count))
    for body, created_at in recent:
        try:
            worker = json.loads(str(body)).get("operational", {}).get("worker")
        except (ValueError, AttributeError):
            continue
        if isinstance(worker, str) and worker and worker not in seen:
            seen[worker] = WorkerSeen(worker=worker, last_seen=str(created_at), running=0)
    return list(seen.values())
