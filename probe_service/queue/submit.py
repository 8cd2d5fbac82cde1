"""Bulk submission for CI farms: validate a JSONL file, persist plans and runs, enqueue.

Nothing from a file is enqueued while any line is invalid (unless the caller skips
invalid lines). Plans and runs are written in batches, one transaction each, before any
message is sent, so a broker outage mid-submission loses nothing: the runs wait in the
store and ``resume_batch`` (or the workers' janitor) sends them again.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, select

from ..errors import InvalidInput, InvalidPlan, ProbeServiceError
from ..plans import Plan, parse_plan, plan_id_of
from ..plans.persist import insert_plans, plan_row
from ..plans.tables import plans
from ..settings import NAMESPACE_ENV
from ..store import Store, append_event
from ..store.referents import hold_referents
from ..store.schema import snapshots
from .runs import batch_counts, new_run_rows
from .tables import runs

if TYPE_CHECKING:
    from .broker import ProbeQueue
    from .dispatch import Queue

__all__ = [
    "BATCH_SIZE",
    "RunSummary",
    "SubmitResult",
    "batch_results",
    "persist_runs_in",
    "read_plans_file",
    "resume_batch",
    "submit_plans",
    "unknown_policy",
    "wait_batch",
]

#: Runs persisted (one transaction) and enqueued per batch.
BATCH_SIZE = 500
_PLAN_ID = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class SubmitResult:
    """A persisted batch: its id, run ids, and how many messages were sent."""

    batch_id: str
    run_ids: list[str]
    enqueued: int


@dataclass(frozen=True)
class RunSummary:
    """One run of a batch, as a CI report shows it."""

    run_id: str
    seq: int
    plan_id: str
    name: str
    state: str
    outcome: str | None
    reason: str | None
    receipt_sha256: str | None
    #: True when the worker served a stored receipt instead of executing.
    reused: bool = False


def read_plans_file(
    path: Path,
    policy_id: str | None,
    skip_invalid: bool = False,
    *,
    known_policies: Collection[str] | None = None,
    policy_of: Callable[[str], str | None] | None = None,
) -> tuple[list[Plan | str], list[str]]:
    """Parse one plan (object) or plan id (string) per line; return items and errors.

    Each line runs under its own plan's ``policy_id``; with ``policy_id`` given every plan
    object must name it. With ``known_policies`` (the policy file's ids), a line whose
    plan names another is refused naming the line -- a bare plan id's policy is its
    stored plan's, from ``policy_of``. Raises InvalidPlan listing every bad line (with its
    number) unless ``skip_invalid``; an unknown policy id refuses the file even then.
    """
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"{path}: cannot read ({exc})") from exc
    items: list[Plan | str] = []
    errors: list[str] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            item = _parse_line(line, policy_id)
        except ProbeServiceError as exc:
            errors.append(f"line {number}: {exc}")
            continue
        named = item.policy_id if isinstance(item, Plan) else (policy_of or _no_policy)(item)
        refusal = unknown_policy(named, known_policies)
        if refusal is not None:
            # Mixing known and unknown policy ids is a mistake in the file, never a line
            # to skip: the whole file is refused before anything is queued.
            raise InvalidPlan(f"{path}: line {number}: {refusal}; nothing submitted")
        items.append(item)
    if errors and not skip_invalid:
        shown = "; ".join(errors[:20]) + ("; …" if len(errors) > 20 else "")
        raise InvalidPlan(f"{path}: {len(errors)} invalid line(s), nothing submitted: {shown}")
    if not items:
        raise InvalidPlan(f"{path}: no plans to submit")
    return items, errors


def _no_policy(plan_id: str) -> None:
    return None


def unknown_policy(policy_id: str | None, known: Collection[str] | None) -> str | None:
    """Why ``policy_id`` cannot run here (not a policy of the file), or None."""
    if policy_id is None or known is None or policy_id in known:
        return None
    return f"policy_id {policy_id!r} is not a policy of the policy file"


def _parse_line(line: str, policy_id: str | None) -> Plan | str:
    if _PLAN_ID.match(line.strip()):  # a bare plan id, as people paste them
        return line.strip()
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InvalidPlan(f"not JSON ({exc.msg})") from exc
    except RecursionError as exc:
        raise InvalidPlan("not JSON (nested too deeply)") from exc
    if isinstance(value, str):
        if not _PLAN_ID.match(value):
            raise InvalidPlan(f"{value!r} is not a plan id")
        return value
    plan = parse_plan(value)
    if policy_id and plan.policy_id != policy_id:
        raise InvalidPlan(f"policy_id: {plan.policy_id!r} differs from --policy {policy_id!r}")
    return plan


def _persist_batch(
    store: Store,
    batch_id: str,
    start: int,
    chunk: Sequence[Plan | str],
    policies: Sequence[str],
    reuse: bool,
    namespace: str,
) -> list[str]:
    """Write a chunk's plans and runs (one per item, under its policy) in one
    transaction; return its run ids."""
    rows = [plan_row(item) for item in chunk if isinstance(item, Plan)]
    plan_ids = [item if isinstance(item, str) else plan_id_of(item) for item in chunk]
    pairs = list(zip(plan_ids, policies, strict=True))
    ids = new_run_rows(batch_id, start, pairs, namespace=namespace, reuse=reuse)
    with store.transaction() as conn:
        _require_known(conn, chunk)
        insert_plans(conn, rows)
        conn.execute(runs.insert(), ids)
        append_event(conn, "batch", batch_id, {"runs": len(ids), "first_seq": start})
    return [str(r["run_id"]) for r in ids]


def persist_runs_in(
    conn: Connection,
    batch_id: str,
    items: Sequence[tuple[Plan, str]],
    *,
    namespace: str,
    reuse: bool = True,
) -> list[str]:
    """Persist each plan (kept when already stored) and one queued run per ``(plan, policy
    id)`` under ``batch_id`` in the caller's transaction; return the run ids, in order.

    The caller sends them (``Queue.send``) once its transaction committed.
    """
    rows = {plan_id_of(plan): plan_row(plan) for plan, _ in items}
    insert_plans(conn, list(rows.values()))
    pairs = [(plan_id_of(plan), policy_id) for plan, policy_id in items]
    ids = new_run_rows(batch_id, 0, pairs, namespace=namespace, reuse=reuse)
    if ids:
        conn.execute(runs.insert(), ids)
        append_event(conn, "batch", batch_id, {"runs": len(ids), "first_seq": 0})
    return [str(r["run_id"]) for r in ids]


def _require_known(conn: Connection, chunk: Sequence[Plan | str]) -> dict[str, str]:
    """Every referenced plan id and snapshot must already be stored; raises InvalidPlan.
    Returns each referenced plan id's policy id (its stored plan's). Both are held until
    the batch commits, so a concurrent gc keeps them or the batch is refused
    (docs/ARCHITECTURE.md, "Retention and gc")."""
    by_id = [item for item in chunk if isinstance(item, str)]
    known: dict[str, str] = {}
    if by_id:
        query = select(plans.c.plan_id, plans.c.body).where(plans.c.plan_id.in_(by_id))
        if conn.dialect.name == "postgresql":
            query = query.with_for_update(read=True, key_share=True)
        stored = conn.execute(query)
        known = {plan_id: str(json.loads(body)["policy_id"]) for plan_id, body in stored}
        missing = [p for p in by_id if p not in known]
        if missing:
            raise InvalidPlan(f"plan {missing[0]}: not stored ({len(missing)} unknown plan ids)")
    wanted = {item.snapshot_id for item in chunk if isinstance(item, Plan)}
    if wanted:
        found = hold_referents(conn, snapshots.c.snapshot_id, wanted)
        if wanted - found:
            raise InvalidPlan(f"snapshot_id: {sorted(wanted - found)[0]} is not stored")
    return known


def submit_plans(
    store: Store,
    queue: Queue,
    items: Sequence[Plan | str],
    policy_id: str | None,
    batch_id: str | None = None,
    *,
    reuse: bool = True,
    known_policies: Collection[str] | None = None,
) -> SubmitResult:
    """Persist every item as a queued run, then hand them to ``queue`` (a broker sends
    them; the embedded queue leaves them in the store); with ``reuse=False`` every run
    executes even when a reusable receipt exists. Each run belongs to the queue's
    namespace (``PROBE_REDIS_NAMESPACE``) and runs under ``policy_id``, or (None) its
    own plan's policy id.

    Raises InvalidPlan (nothing persisted) when a plan id or snapshot is not stored, or
    a run's policy id is not one of ``known_policies`` (naming the item);
    BrokerUnavailable after persisting, naming the batch to resume.
    """
    batch_id = batch_id or uuid.uuid4().hex
    namespace = queue.namespace
    # Check every chunk before persisting any: a refused submission must leave no queued
    # run behind, or the janitor would later send runs the caller was told were refused.
    policies: list[str] = []
    with store.reading() as conn:
        for start in range(0, len(items), BATCH_SIZE):
            chunk = items[start : start + BATCH_SIZE]
            stored = _require_known(conn, chunk)
            for item in chunk:
                own = item.policy_id if isinstance(item, Plan) else stored[item]
                policies.append(policy_id or own)
    for index, named in enumerate(policies):
        refusal = unknown_policy(named, known_policies)
        if refusal is not None:
            raise InvalidPlan(f"items[{index}]: {refusal}; nothing submitted")
    run_ids: list[str] = []
    for start in range(0, len(items), BATCH_SIZE):
        run_ids.extend(
            _persist_batch(
                store,
                batch_id,
                start,
                items[start : start + BATCH_SIZE],
                policies[start : start + BATCH_SIZE],
                reuse,
                namespace,
            )
        )
    enqueued = queue.send(store, batch_id, run_ids)
    return SubmitResult(batch_id=batch_id, run_ids=run_ids, enqueued=enqueued)


def resume_batch(store: Store, queue: ProbeQueue, batch_id: str) -> int:
    """Enqueue again every run of a batch that is still queued; return how many were sent.

    Raises InvalidInput for an unknown batch, or one submitted to another queue namespace
    (its runs are only ever sent to their own namespace); BrokerUnavailable.
    """
    with store.reading() as conn:
        known = conn.execute(
            select(runs.c.namespace).where(runs.c.batch_id == batch_id).limit(1)
        ).first()
        queued = list(
            conn.execute(
                select(runs.c.run_id).where(
                    runs.c.batch_id == batch_id,
                    runs.c.state == "queued",
                    runs.c.namespace == queue.namespace,
                )
            ).scalars()
        )
    if known is None:
        raise InvalidInput(f"batch {batch_id}: no such batch")
    if known.namespace != queue.namespace:
        raise InvalidInput(
            f"batch {batch_id}: submitted to queue namespace {known.namespace!r}, not "
            f"{queue.namespace!r}; resume it with {NAMESPACE_ENV}={known.namespace}"
        )
    return queue.send(store, batch_id, queued)


#: The first wait between two polls of ``wait_batch``; each later one doubles, up to its
#: ``poll_s``.
FIRST_POLL_S = 0.02


def wait_batch(
    store: Store,
    batch_id: str,
    on_progress: Callable[[dict[str, int]], None],
    *,
    poll_s: float = 0.5,
    timeout_s: float | None = None,
) -> dict[str, int]:
    """Poll until every run of the batch is done (or the timeout passes); return counts.

    The first polls come quickly and back off to ``poll_s``: a trivial run finishes in a
    fraction of a second, and a fixed half-second poll would be most of its wait."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    delay = min(FIRST_POLL_S, poll_s)
    while True:
        counts = batch_counts(store, batch_id)
        on_progress(counts)
        if counts.get("queued", 0) + counts.get("running", 0) == 0:
            return counts
        if deadline is not None and time.monotonic() > deadline:
            return counts
        time.sleep(delay)
        delay = min(poll_s, delay * 2)


def batch_results(store: Store, batch_id: str) -> list[RunSummary]:
    """Every run of a batch in submission order, with its plan's hypothesis as its name."""
    with store.reading() as conn:
        rows = conn.execute(
            select(runs, plans.c.body)
            .join(plans, plans.c.plan_id == runs.c.plan_id)
            .where(runs.c.batch_id == batch_id)
            .order_by(runs.c.seq)
        ).all()
    return [
        RunSummary(
            run_id=r.run_id,
            seq=r.seq,
            plan_id=r.plan_id,
            name=json.loads(r.body).get("hypothesis") or r.plan_id,
            state=r.state,
            outcome=r.outcome,
            reason=r.reason,
            receipt_sha256=r.receipt_sha256,
            reused=bool(r.reused),
        )
        for r in rows
    ]
