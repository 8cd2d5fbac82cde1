"""The job queue: runs in the store, ids over a dramatiq Redis broker, workers, bulk submit.

The broker, the worker's execution, metrics, the supervisor and the JUnit writer are
imported on first use (PEP 562): reading or persisting runs, as a store-only CLI command
does, never loads dramatiq, Redis or Prometheus (docs/ARCHITECTURE.md, "The operation
table").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .broker import DEFAULT_QUEUE, REDIS_URL_ENV, ProbeQueue
    from .dispatch import Queue, open_queue
    from .execute import WorkerContext, execute_run, reap_runs
    from .inline import InlineQueue, run_inline
    from .junit import write_junit
    from .metrics import METRICS_PORT_ENV, StoreCollector, exposition, serve_metrics
    from .queued_run import run_or_status, run_queued
    from .runs import batch_counts, create_runs
    from .status import RunStatus, read_run_status
    from .submit import (
        RunSummary,
        SubmitResult,
        batch_results,
        persist_runs_in,
        read_plans_file,
        resume_batch,
        submit_plans,
        wait_batch,
    )
    from .supervisor import WorkerMetrics, run_supervisor

__all__ = [
    "DEFAULT_QUEUE",
    "METRICS_PORT_ENV",
    "REDIS_URL_ENV",
    "InlineQueue",
    "ProbeQueue",
    "Queue",
    "RunStatus",
    "RunSummary",
    "StoreCollector",
    "SubmitResult",
    "WorkerContext",
    "WorkerMetrics",
    "batch_counts",
    "batch_results",
    "create_runs",
    "execute_run",
    "exposition",
    "open_queue",
    "persist_runs_in",
    "read_plans_file",
    "read_run_status",
    "reap_runs",
    "resume_batch",
    "run_inline",
    "run_or_status",
    "run_queued",
    "run_supervisor",
    "serve_metrics",
    "submit_plans",
    "wait_batch",
    "write_junit",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__)
