"""The job queue: runs in the store, ids over a dramatiq Redis broker, workers, bulk submit."""

from __future__ import annotations

from .broker import DEFAULT_QUEUE, REDIS_URL_ENV, ProbeQueue
from .execute import WorkerContext, execute_run, reap_runs
from .junit import write_junit
from .metrics import METRICS_PORT_ENV, serve_metrics
from .runs import batch_counts, create_runs
from .submit import (
    RunSummary,
    SubmitResult,
    batch_results,
    read_plans_file,
    resume_batch,
    submit_plans,
    wait_batch,
)
from .supervisor import run_supervisor

__all__ = [
    "DEFAULT_QUEUE",
    "METRICS_PORT_ENV",
    "REDIS_URL_ENV",
    "ProbeQueue",
    "RunSummary",
    "SubmitResult",
    "WorkerContext",
    "batch_counts",
    "batch_results",
    "create_runs",
    "execute_run",
    "read_plans_file",
    "reap_runs",
    "resume_batch",
    "run_supervisor",
    "serve_metrics",
    "submit_plans",
    "wait_batch",
    "write_junit",
]
