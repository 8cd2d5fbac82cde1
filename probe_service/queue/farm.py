"""Read-only statistics of the probe farm, from the store (docs/ARCHITECTURE.md, "Web view").

The farm is the ``runs`` table: queue depth and running runs are counted there by index
range; outcomes, reasons, throughput and submit-to-receipt latency per time bucket come
from ``farm_minutes``, which a trigger keeps per minute as runs finish (migration
``0008_web_indexes``), so a day costs at most 1,440 rows per outcome and reason however
many runs it held. Runs executed in a process (``inprocess_runs``: ``byte-probe demo``, an
embedded ``run``) count in the outcomes, reasons and throughput too, grouped per minute by
the database (they have no submit-to-receipt latency: the latency is the queue's). Workers
are those holding a lease now and those that wrote one of the newest receipts (the worker
name is an operational field of a receipt).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy import BigInteger, Column, Connection, MetaData, String, Table, func, select

from ..errors import ReceiptInvalid
from ..plans import parse_receipt_json
from ..plans.tables import receipts
from ..store import Store
from .listing import inprocess_runs, iso_of_ms, ms_of_iso
from .runs import now_ms
from .tables import runs

__all__ = ["Bucket", "FarmStats", "WorkerSeen", "farm_stats"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


#: How many of the newest receipts are read for the worker names they carry.
WORKER_SAMPLE = 200
MINUTE_MS = 60_000

#: Finished queued runs per minute, outcome and reason, kept by a trigger on ``runs``
#: (migration ``0008_web_indexes``). Not on the shared metadata: only the migration
#: creates it, and only this module reads it.
farm_minutes = Table(
    "farm_minutes",
    MetaData(),
    Column("minute", BigInteger, primary_key=True),
    Column("outcome", String(16), primary_key=True),
    Column("reason", String(64), primary_key=True),
    Column("finished", BigInteger, nullable=False),
    Column("latency_sum_ms", BigInteger, nullable=False),
    Column("latency_max_ms", BigInteger, nullable=False),
)


class Bucket(_Frozen):
    """Runs that finished in ``[start_ms, start_ms + width)``: ``finished`` of both kinds,
    ``in_process`` of them executed in a process; the latency is the queued runs'."""

    start_ms: int
    finished: int
    latency_avg_ms: float | None
    latency_max_ms: int | None
    in_process: int = 0


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
    #: Runs executed in a process (no queue) whose receipt is in the window.
    in_process_in_window: int
    workers: list[WorkerSeen] = []


def farm_stats(store: Store, *, window_ms: int, buckets: int) -> FarmStats:
    """Statistics over the runs that finished in the last ``window_ms`` (whole minutes).

    Raises StoreUnavailable when the store fails.
    """
    now = now_ms()
    width = max(MINUTE_MS, window_ms // buckets // MINUTE_MS * MINUTE_MS)
    end = (now // MINUTE_MS + 1) * MINUTE_MS  # the current minute counts
    start = end - width * buckets
    fm = farm_minutes.c
    with store.reading() as conn:
        # Queued and running runs are few next to done ones: counted by index range.
        by_state = {
            str(state): int(n)
            for cond in (runs.c.state < "done", runs.c.state > "done")
            for state, n in conn.execute(
                select(runs.c.state, func.count()).where(cond).group_by(runs.c.state)
            )
        }
        minutes = conn.execute(
            select(fm.minute, fm.outcome, fm.reason, fm.finished, fm.latency_sum_ms)
            .add_columns(fm.latency_max_ms)
            .where(fm.minute >= start // MINUTE_MS)
        ).all()
        in_process = _inprocess_minutes(conn, start)
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
    series = _buckets(minutes, in_process, start, width, buckets)
    finished = sum(b.finished for b in series)
    if finished:
        by_state["done in window"] = finished
    return FarmStats(
        now_ms=now,
        window_ms=width * buckets,
        bucket_ms=width,
        queue_depth=by_state.get("queued", 0),
        by_state=by_state,
        outcomes=_tally([*minutes, *in_process], 1),
        reasons=_tally([*minutes, *in_process], 2),
        buckets=series,
        in_process_in_window=sum(int(row[3]) for row in in_process),
        workers=_workers(holders, recent),
    )


def _inprocess_minutes(conn: Connection, start_ms: int) -> list[tuple[int, str, str, int]]:
    """``(minute, outcome, reason, runs)`` of the runs in process since ``start_ms``, grouped
    per minute by the database (the receipts' ISO time cut to the minute)."""
    ip = inprocess_runs.c
    minute = func.substr(ip.created_at, 1, 16)
    rows = conn.execute(
        select(minute, ip.outcome, ip.reason, func.count())
        .where(ip.created_at >= iso_of_ms(start_ms))
        .group_by(minute, ip.outcome, ip.reason)
    )
    return [
        (ms_of_iso(f"{text}+00:00") // MINUTE_MS, str(outcome), str(reason), int(n))
        for text, outcome, reason, n in rows
    ]


def _buckets(
    minutes: Sequence[Any], in_process: Sequence[Any], start: int, width: int, n: int
) -> list[Bucket]:
    count, total, alone = [0] * n, [0] * n, [0] * n
    longest: list[int | None] = [None] * n

    def slot_of(minute: int) -> int | None:
        slot = (int(minute) * MINUTE_MS - start) // width
        return slot if 0 <= slot < n else None

    for minute, _outcome, _reason, finished, summed, most in minutes:
        slot = slot_of(minute)
        if slot is None:
            continue
        count[slot] += int(finished)
        total[slot] += int(summed)
        current = longest[slot]
        longest[slot] = int(most) if current is None else max(current, int(most))
    for minute, _outcome, _reason, finished in in_process:
        slot = slot_of(minute)
        if slot is not None:
            alone[slot] += int(finished)
    return [
        Bucket(
            start_ms=start + i * width,
            finished=count[i] + alone[i],
            latency_avg_ms=(total[i] / count[i]) if count[i] else None,
            latency_max_ms=longest[i],
            in_process=alone[i],
        )
        for i in range(n)
    ]


def _tally(rows: Sequence[Any], column: int) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in rows:
        key = str(row[column]) or "none"
        counts[key] = counts.get(key, 0) + int(row[3])
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _workers(holders: Sequence[Any], recent: Sequence[Any]) -> list[WorkerSeen]:
    seen: dict[str, WorkerSeen] = {}
    for owner, count, _expires in holders:
        seen[str(owner)] = WorkerSeen(worker=str(owner), last_seen="now", running=int(count))
    for body, created_at in recent:
        try:
            worker = parse_receipt_json(str(body)).operational.worker
        except ReceiptInvalid:
            continue
        if worker and worker not in seen:
            seen[worker] = WorkerSeen(worker=worker, last_seen=str(created_at), running=0)
    return list(seen.values())
