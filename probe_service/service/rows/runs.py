"""Rows over queued runs: submit, follow and cancel batches, list runs, farm statistics."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ... import claims
from ... import queue as queues
from ...claims.recheck_records import RecheckReport
from ...errors import Conflict, NotFound
from ...plans.models import Plan
from ...queue.batch_report import BatchReport
from ...queue.batch_report import batch_report as _batch_report
from ...queue.farm import FarmStats
from ...queue.farm import farm_stats as _farm_stats
from ...queue.listing import RunFilters, RunPage, list_runs
from ...queue.runs import cancel_run
from ...queue.submit import RunSummary
from ...settings import REDIS_URL_ENV
from ..registry import ADMIN, AGENT, HOST, WEB, Request, operation
from ..session import ProbeService
from .common import BatchId, Frozen, PlanId, RunId, SnapshotId

__all__: list[str] = []

_LABEL = r"^[A-Za-z0-9_.:-]+$"


class ProbeSubmitRequest(Request):
    plan_ids: tuple[PlanId, ...] = Field(
        min_length=1,
        max_length=100_000,
        description="Stored plan ids (or unique prefixes), each run once.",
    )
    policy_id: str = Field(
        min_length=1,
        max_length=128,
        description="The administrator policy every plan names (its policy_id).",
    )
    reuse: bool = Field(True, description="Serve stored receipts of identical actions.")


@operation("probe_submit")
def probe_submit(svc: ProbeService, req: ProbeSubmitRequest) -> queues.SubmitResult:
    """Queue stored plans under one policy id as one batch, returning at once. The answer
    holds the batch id and run ids (poll run_status with each run id); without a configured
    queue the runs execute in this process in the background. Refuses the whole batch
    (nothing stored) when a plan id is not stored or, without a configured queue, when
    this service's policy file has no policy_id."""
    queue = svc.queue
    queue.admit(svc.store, req.policy_id)
    submitted = queues.submit_plans(
        svc.store, queue, list(req.plan_ids), req.policy_id, reuse=req.reuse
    )
    queue.start(svc.store, submitted.run_ids)
    return submitted


class BatchStatusRequest(Request):
    batch_id: BatchId


class BatchStatus(Frozen):
    batch_id: str
    counts: dict[str, int]
    runs: list[RunSummary]
    #: For the batch of an obligation_recheck: its report, settled once every run is done.
    recheck: RecheckReport | None = None


@operation("batch_status")
def batch_status(svc: ProbeService, req: BatchStatusRequest) -> BatchStatus:
    """Counts by state and outcome, and every run of a batch with its receipt id. For the
    batch of an obligation_recheck, its report: once every run is done the recheck is
    settled (exactly once, by whoever sees it first) and each obligation is resolved
    rechecked or left open naming the receipt that disagreed."""
    return _status(svc, req.batch_id)


def _status(svc: ProbeService, batch_id: str) -> BatchStatus:
    runs = queues.batch_results(svc.store, batch_id)
    recheck = claims.settle_recheck(
        svc.store, batch_id, runs, svc.receipts, settled_by=f"poll via {svc.interface}"
    )
    return BatchStatus(
        batch_id=batch_id,
        counts=queues.batch_counts(svc.store, batch_id),
        runs=runs,
        recheck=recheck,
    )


class RunCancelRequest(Request):
    run_id: RunId


class RunCancelled(Frozen):
    run_id: str
    state: Literal["cancelled"]


@operation("run_cancel")
def run_cancel(svc: ProbeService, req: RunCancelRequest) -> RunCancelled:
    """Cancel a queued run so that no worker ever executes it. Refuses a run a worker
    already took or that is done."""
    state = cancel_run(svc.store, req.run_id)
    if state == "unknown":
        raise NotFound(f"run {req.run_id}: not stored")
    if state != "queued":
        raise Conflict(f"run {req.run_id}: {state}; only a queued run can be cancelled")
    return RunCancelled(run_id=req.run_id, state="cancelled")


class BatchSubmitRequest(Request):
    items: tuple[Plan | PlanId, ...] = Field(
        min_length=1, max_length=100_000, description="Plans, or stored plan ids (or prefixes)."
    )
    policy_id: str = Field(min_length=1, max_length=128)
    reuse: bool = True
    threads: int = Field(2, ge=1, le=64, description="Threads when the runs execute here.")


class BatchSubmitted(Frozen):
    batch_id: str
    run_ids: list[str]
    enqueued: int
    #: True when no queue is configured and the runs executed in this process.
    embedded: bool


@operation("batch_submit", faces=ADMIN, long_running=True)
def batch_submit(svc: ProbeService, req: BatchSubmitRequest) -> BatchSubmitted:
    """Persist plans (or stored plan ids) as one batch of runs and enqueue them. Plans and
    runs are stored under one policy id in the same transactions; without a configured
    queue the runs execute in this process. Refuses the whole batch (nothing stored) when a plan id
    or snapshot is not stored."""
    queue = svc.queue
    result = queues.submit_plans(svc.store, queue, list(req.items), req.policy_id, reuse=req.reuse)
    queue.execute_submitted(svc.store, result.run_ids, req.threads)
    return BatchSubmitted(
        batch_id=result.batch_id,
        run_ids=result.run_ids,
        enqueued=result.enqueued,
        embedded=queue.embedded,
    )


class BatchIdRequest(Request):
    batch_id: BatchId


class BatchResumed(Frozen):
    batch_id: str
    enqueued: int


@operation("batch_resume", faces=ADMIN)
def batch_resume(svc: ProbeService, req: BatchIdRequest) -> BatchResumed:
    """Send a batch's still-queued runs to the queue again (after a broker outage).
    Refuses without a configured queue, or for an unknown batch."""
    queue = svc.queue.require_broker(f"batch_resume: needs a queue ({REDIS_URL_ENV})")
    return BatchResumed(
        batch_id=req.batch_id, enqueued=queues.resume_batch(svc.store, queue, req.batch_id)
    )


class BatchWaitRequest(BatchIdRequest):
    timeout_seconds: float = Field(3600.0, ge=0, le=86_400)


@operation("batch_wait", faces=ADMIN, long_running=True)
def batch_wait(svc: ProbeService, req: BatchWaitRequest) -> BatchStatus:
    """Wait in this process until every run of a batch is done or the timeout passes, and
    return its status; the session's progress callback sees the counts at each poll."""
    progress = svc.on_progress or (lambda _: None)
    queues.wait_batch(svc.store, req.batch_id, progress, timeout_s=req.timeout_seconds)
    return _status(svc, req.batch_id)


class RunListRequest(Request):
    run_id: RunId | None = Field(None, description="Only this run (id or prefix).")
    batch_id: BatchId | None = Field(None, description="Only this batch's runs (id or prefix).")
    outcome: Literal["supports", "refutes", "inconclusive"] | None = Field(
        None, description="Only this outcome."
    )
    reason: str | None = Field(
        None,
        min_length=1,
        max_length=128,
        pattern=_LABEL,
        description="Only this reason (e.g. timeout, executable_not_allowed).",
    )
    policy_id: str | None = Field(
        None, min_length=1, max_length=128, pattern=_LABEL, description="Only this policy's."
    )
    snapshot_id: SnapshotId | None = Field(
        None, description="Only runs of plans on this snapshot (id or prefix)."
    )
    state: Literal["queued", "running", "done"] | None = Field(None, description="Only this state.")
    limit: int = Field(50, ge=1, le=500, description="Page size (at most 500).")
    cursor: str | None = Field(
        None, max_length=100, description="next_cursor of the previous page."
    )


@operation("run_list", faces=AGENT | WEB)
def run_list(svc: ProbeService, req: RunListRequest) -> RunPage:
    """List runs newest first, queued and run in a process alike. Queued ones carry batch,
    state and attempts, each run its plan's hypothesis; filtered by run id, batch, outcome,
    reason, policy id, snapshot or state (ids or prefixes); pages of at most 500 with a
    cursor. Read-only; ids only, never policy bodies."""
    filters = RunFilters(
        run_id=req.run_id,
        batch_id=req.batch_id,
        outcome=req.outcome,
        reason=req.reason,
        policy_id=req.policy_id,
        snapshot_id=req.snapshot_id,
        state=req.state,
    )
    return list_runs(svc.store, filters, limit=req.limit, cursor=req.cursor)


class FarmStatsRequest(Request):
    window_hours: float = Field(24.0, gt=0, le=24 * 30)
    buckets: int = Field(24, ge=1, le=200)


@operation("farm_stats", faces=HOST | WEB)
def farm_stats(svc: ProbeService, req: FarmStatsRequest) -> FarmStats:
    """Queue depth, runs by state, outcomes and reasons, throughput and submit-to-receipt
    latency per time bucket over a window, and the workers seen recently. Read-only."""
    window_ms = int(req.window_hours * 3_600_000)
    return _farm_stats(svc.store, window_ms=window_ms, buckets=req.buckets)


class BatchReportRequest(Request):
    batch_id: BatchId
    limit: int = Field(10, ge=1, le=100, description="Runs listed as slowest and as failures.")


@operation("batch_report", faces=AGENT | WEB)
def batch_report(svc: ProbeService, req: BatchReportRequest) -> BatchReport:
    """A batch's counts, progress, slowest runs and failures. Runs by state and outcome,
    how many are done and how many were taken more than once; its `limit` slowest runs
    (submission to done) and its first `limit` runs that did not support their
    hypothesis, each with its hypothesis, reason, attempts and receipt. Read-only:
    settles nothing (batch_status does). Refuses an unknown batch."""
    return _batch_report(svc.store, req.batch_id, limit=req.limit)
