"""Read-only listing of runs for operators: the farm's runs and the runs of this process.

A run lives in one of two places (docs/ARCHITECTURE.md, "Web view"): a queued run has a
row in ``runs`` (with its receipt, once done, in ``receipts``), while a run executed in the
caller's process (``probe_run`` without a queue, ``byte-probe demo``) has only its receipt,
noted in ``inprocess_runs`` by a trigger on ``receipts``.
The list merges both, newest first: a queued run by its submission time, a run in process
by its receipt's time. Pagination is by keyset (a cursor of time and run id), so a page
costs the same at the start and at the end of a 100,000-run store; the indexes come with
migration ``0008_web_indexes``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy import (
    Column,
    Connection,
    MetaData,
    Select,
    String,
    Table,
    and_,
    or_,
    select,
)

from ..errors import InvalidInput
from ..plans.tables import plans
from ..store import Store
from .tables import runs

__all__ = [
    "RunEntry",
    "RunFilters",
    "RunPage",
    "inprocess_runs",
    "list_runs",
    "plan_hypotheses",
    "plan_keys",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


#: States a run of the list can be in; a run in process is always ``done``.
STATES = ("queued", "running", "done")

#: The snapshot and policy ids of each stored plan, kept by a trigger on ``plans``
#: (migration ``0008_web_indexes``), so runs filter by snapshot through an index.
plan_keys = Table(
    "plan_keys",
    MetaData(),
    Column("plan_id", String(64), primary_key=True),
    Column("snapshot_id", String(64)),
    Column("policy_id", String(128)),
)

#: Runs executed in a process (no ``runs`` row), one per receipt; written by a trigger on
#: ``receipts`` (migration ``0008_web_indexes``), insert-only. Not on the shared metadata:
#: only the migration creates it, and only this module reads it.
inprocess_runs = Table(
    "inprocess_runs",
    MetaData(),
    Column("run_id", String(64), primary_key=True),
    Column("created_at", String(32), nullable=False),
    Column("plan_id", String(64), nullable=False),
    Column("policy_id", String(128)),
    Column("snapshot_id", String(64)),
    Column("outcome", String(16), nullable=False),
    Column("reason", String(64), nullable=False),
    Column("receipt_sha256", String(64), nullable=False),
)


class RunFilters(_Frozen):
    """Equality filters; None means any."""

    run_id: str | None = None
    batch_id: str | None = None
    outcome: str | None = None
    reason: str | None = None
    policy_id: str | None = None
    snapshot_id: str | None = None
    state: str | None = None


class RunEntry(_Frozen):
    """One row of the list."""

    run_id: str
    source: str  # "queue" or "process"
    batch_id: str | None
    plan_id: str
    policy_id: str | None
    state: str
    outcome: str | None
    reason: str | None
    receipt_sha256: str | None
    at_ms: int
    finished_ms: int | None
    attempts: int | None
    #: The plan's hypothesis (plan content: untrusted text), None when the plan says none.
    hypothesis: str | None = None


class RunPage(_Frozen):
    """A page of runs and the cursor of the next one (None on the last page)."""

    runs: list[RunEntry]
    next_cursor: str | None


def encode_cursor(at_ms: int, run_id: str) -> str:
    """The cursor after a row: its time and its run id."""
    return f"{at_ms}-{run_id}"


def decode_cursor(cursor: str) -> tuple[int, str]:
    """Parse a cursor; InvalidInput names the field when it is malformed."""
    at, _, run_id = cursor.partition("-")
    if not (at.isdigit() and len(at) <= 13 and run_id.isalnum() and 32 <= len(run_id) <= 64):
        raise InvalidInput("cursor: not a cursor this list returned")
    return int(at), run_id


def iso_of_ms(ms: int) -> str:
    """The receipts' time format (``utc_now``) of a millisecond timestamp."""
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="microseconds")


def ms_of_iso(text: str) -> int:
    """Milliseconds of a receipt's ISO-8601 time."""
    return int(datetime.fromisoformat(text).timestamp() * 1000)


def list_runs(
    store: Store, filters: RunFilters, *, limit: int, cursor: str | None = None
) -> RunPage:
    """One page of runs matching ``filters``, newest first, after ``cursor``.

    Raises InvalidInput for a malformed cursor, StoreUnavailable when the store fails.
    """
    before = decode_cursor(cursor) if cursor else None
    with store.reading() as conn:
        queued = _queue_rows(conn, filters, limit + 1, before)
        # The page's window in time: runs in process older than the oldest queued row
        # shown belong to later pages, so only the window is probed (bounded cost).
        floor = queued[limit - 1].at_ms if len(queued) > limit else None
        in_process = _process_rows(conn, filters, limit + 1, before, floor)
        merged = sorted(queued + in_process, key=lambda r: (r.at_ms, r.run_id), reverse=True)
        named = plan_hypotheses(conn, [r.plan_id for r in merged[:limit]])
    page = [r.model_copy(update={"hypothesis": named.get(r.plan_id)}) for r in merged[:limit]]
    more = len(merged) > limit
    next_cursor = encode_cursor(page[-1].at_ms, page[-1].run_id) if more and page else None
    return RunPage(runs=page, next_cursor=next_cursor)


def plan_hypotheses(conn: Connection, plan_ids: Sequence[str]) -> dict[str, str]:
    """``plan_id -> hypothesis`` of the stored plans among ``plan_ids`` that state one (one
    statement for a page; a body that is not a JSON object names nothing)."""
    found: dict[str, str] = {}
    wanted = sorted(set(plan_ids))
    if not wanted:
        return found
    for plan_id, body in conn.execute(
        select(plans.c.plan_id, plans.c.body).where(plans.c.plan_id.in_(wanted))
    ):
        try:
            hypothesis = json.loads(body).get("hypothesis")
        except (ValueError, AttributeError):
            continue
        if isinstance(hypothesis, str) and hypothesis:
            found[str(plan_id)] = hypothesis
    return found


def _plan_ids(filters: RunFilters) -> Select[Any] | None:
    if filters.snapshot_id is None:
        return None
    return select(plan_keys.c.plan_id).where(plan_keys.c.snapshot_id == filters.snapshot_id)


def _queue_rows(
    conn: Connection, filters: RunFilters, limit: int, before: tuple[int, str] | None
) -> list[RunEntry]:
    query = select(runs).order_by(runs.c.submitted_ms.desc(), runs.c.run_id.desc()).limit(limit)
    for column, value in (
        (runs.c.run_id, filters.run_id),
        (runs.c.batch_id, filters.batch_id),
        (runs.c.outcome, filters.outcome),
        (runs.c.reason, filters.reason),
        (runs.c.policy_id, filters.policy_id),
        (runs.c.state, filters.state),
    ):
        if value is not None:
            query = query.where(column == value)
    plan_ids = _plan_ids(filters)
    if plan_ids is not None:
        query = query.where(runs.c.plan_id.in_(plan_ids))
    if before is not None:
        at, run_id = before
        query = query.where(
            or_(
                runs.c.submitted_ms < at,
                and_(runs.c.submitted_ms == at, runs.c.run_id < run_id),
            )
        )
    return [
        RunEntry(
            run_id=r.run_id,
            source="queue",
            batch_id=r.batch_id,
            plan_id=r.plan_id,
            policy_id=r.policy_id,
            state=r.state,
            outcome=r.outcome,
            reason=r.reason,
            receipt_sha256=r.receipt_sha256,
            at_ms=r.submitted_ms,
            finished_ms=r.finished_ms,
            attempts=r.attempts,
        )
        for r in conn.execute(query)
    ]


def _process_rows(
    conn: Connection,
    filters: RunFilters,
    limit: int,
    before: tuple[int, str] | None,
    floor_ms: int | None,
) -> list[RunEntry]:
    if filters.batch_id is not None or filters.state not in (None, "done"):
        return []  # a run in process has no batch and is done once it is listed
    ip = inprocess_runs.c
    query = select(inprocess_runs).order_by(ip.created_at.desc(), ip.run_id.desc()).limit(limit)
    for column, value in (
        (ip.run_id, filters.run_id),
        (ip.outcome, filters.outcome),
        (ip.reason, filters.reason),
        (ip.policy_id, filters.policy_id),
        (ip.snapshot_id, filters.snapshot_id),
    ):
        if value is not None:
            query = query.where(column == value)
    if before is not None:
        # Times of both kinds compare in milliseconds; the receipt's finer time is cut
        # to the millisecond at the boundary, and the run id breaks the tie.
        query = query.where(ip.created_at < iso_of_ms(before[0] + 1))
    if floor_ms is not None:
        query = query.where(ip.created_at >= iso_of_ms(floor_ms))
    rows = []
    for r in conn.execute(query):
        at = ms_of_iso(r.created_at)
        if before is not None and (at, r.run_id) >= before:
            continue
        rows.append(
            RunEntry(
                run_id=r.run_id,
                source="process",
                batch_id=None,
                plan_id=r.plan_id,
                policy_id=r.policy_id,
                state="done",
                outcome=r.outcome,
                reason=r.reason,
                receipt_sha256=r.receipt_sha256,
                at_ms=at,
                finished_ms=at,
                attempts=None,
            )
        )
    return rows
