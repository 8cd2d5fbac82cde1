"""A small farm for gc tests: captured trees, plans, queued runs finished with receipts."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from probe_service.plans import plan_id_of
from probe_service.plans.persist import save_plan, save_receipt
from probe_service.policies.retention import Retention
from probe_service.queue.runs import create_runs, finish_run_in
from probe_service.queue.take import take_run
from probe_service.store import Store

from ..crash.writer import _capture, _plan, _receipt

#: Every kind kept one day: a gc "ten days later" finds everything aged.
ONE_DAY = Retention(
    runs_days=1,
    receipts_days=1,
    envelopes_days=1,
    plans_days=1,
    snapshots_days=1,
    blobs_days=1,
    events_days=1,
    batch_rows=3,
)


def later(days: int = 10) -> datetime:
    """A moment ``days`` from now: what gc sees when the farm has aged."""
    return datetime.now(UTC) + timedelta(days=days)


@dataclass(frozen=True)
class FarmRun:
    """One finished run of the farm and what it made."""

    snapshot_id: str
    plan_id: str
    run_id: str
    receipt_sha256: str


def run_one(store: Store, root: Path, tag: str) -> FarmRun:
    """Capture a new tree, plan on it, queue, take and finish one run with its receipt."""
    snapshot_id = _capture(store, root / f"tree-{tag}", tag)
    plan = _plan(snapshot_id, tag)
    save_plan(store, plan)
    plan_id = plan_id_of(plan)
    (run_id,) = create_runs(store, f"batch-{tag}", [(plan_id, "crash-policy")])
    take_run(store, run_id, "gc-test", 60_000)
    receipt = _receipt(plan_id, snapshot_id, run_id)
    save_receipt(
        store,
        run_id,
        receipt,
        reusable=True,
        also=lambda conn: finish_run_in(
            conn,
            run_id,
            outcome="supports",
            reason="oracle_passed",
            receipt_sha256=receipt.receipt_sha256,
            action_key=receipt.committed.action_key,
        ),
    )
    return FarmRun(snapshot_id, plan_id, run_id, receipt.receipt_sha256)


def build_farm(store: Store, root: Path, count: int, prefix: str = "r") -> list[FarmRun]:
    """``count`` finished runs, each on its own tree."""
    return [run_one(store, root, f"{prefix}{i}") for i in range(count)]
