"""What the CLI's ``worker`` and ``submit`` commands use beside the table.

A worker runs the queue's own machinery (its supervisor and metrics endpoints): it serves
the table's runs rather than calling it. ``submit`` reads its JSONL file and writes JUnit
with the queue's file formats. The faces reach them here, at the service layer, never in
the queue part (docs/ARCHITECTURE.md, "Layers"). The commands import this module when
they run, so no other command loads the queue ("Start-up").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from ..errors import ProbeServiceError
from ..plans import Plan, Receipt, load_plan, receipt_cases
from ..queue import (
    DEFAULT_QUEUE,
    RunSummary,
    StoreCollector,
    WorkerMetrics,
    exposition,
    run_supervisor,
    serve_metrics,
)
from ..queue import read_plans_file as _read_plans_file
from ..queue import write_junit as _write_junit
from ..queue.sizing import worker_size
from .rows.runs import known_policy_ids
from .session import ProbeService

__all__ = [
    "DEFAULT_QUEUE",
    "StoreCollector",
    "WorkerMetrics",
    "exposition",
    "read_plans_file",
    "run_supervisor",
    "serve_metrics",
    "worker_size",
    "write_junit",
]


def read_plans_file(
    svc: ProbeService, path: Path, policy_id: str | None, skip_invalid: bool
) -> tuple[list[Plan | str], list[str]]:
    """The plans file's items, each line's policy id checked against the session's
    policy file (when it has one) so a refusal names the line (docs/ARCHITECTURE.md,
    "Job queue"). Raises InvalidPlan as the queue's reader."""

    def stored_policy(plan_id: str) -> str | None:
        try:
            return load_plan(svc.store, plan_id).policy_id
        except ProbeServiceError:  # not stored: the submission refuses it, named
            return None

    return _read_plans_file(
        path,
        policy_id,
        skip_invalid,
        known_policies=known_policy_ids(svc),
        policy_of=stored_policy,
    )


def write_junit(
    svc: ProbeService,
    path: Path,
    batch_id: str,
    results: Sequence[RunSummary],
    receipts: Mapping[str, Receipt],
) -> None:
    """The batch's JUnit file, each probe's own cases read (and verified) from the
    session's store (docs/ARCHITECTURE.md, "JUnit oracle")."""
    _write_junit(path, batch_id, results, receipts, lambda r: receipt_cases(svc.store, r))
