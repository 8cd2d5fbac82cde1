"""The ``obligation_recheck`` row: rerun the evidence of open obligations' claims on their
snapshot, as one batch through the session's queue (docs/ARCHITECTURE.md, "Recheck")."""

from __future__ import annotations

import functools

from pydantic import Field

from ... import claims
from ... import queue as queues
from ..registry import Request, operation
from ..session import ProbeService
from .common import ObligationId, SnapshotId

__all__: list[str] = []


class ObligationRecheckRequest(Request):
    snapshot_id: SnapshotId
    scope: str | None = Field(
        None, max_length=200, description="Only obligations of this project key (scope)."
    )
    obligation_ids: tuple[ObligationId, ...] = Field(
        (),
        max_length=1000,
        description="Only these open obligations on the snapshot (default: every one in scope).",
    )
    reuse: bool = Field(True, description="Serve a stored receipt of an identical rerun.")


@operation("obligation_recheck")
def obligation_recheck(svc: ProbeService, req: ObligationRecheckRequest) -> claims.RecheckReport:
    """Rerun, for each open obligation on a snapshot (in a scope, or those named), the
    evidence its claim rests on: the same plans with only snapshot_id changed, under the
    same policy ids, as one batch of runs. Returns at once with the batch id; poll
    batch_status, which settles the recheck when the last run is done: every rerun agrees
    -> resolved rechecked; otherwise the obligation stays open naming the receipt. A claim
    with nothing to rerun is listed as needing a person or an agent, with what it rests on.
    Refuses, writing nothing: an obligation already resolved, of another scope or
    snapshot, or (named) with nothing to rerun."""
    queue = svc.queue
    report = claims.obligation_recheck(
        svc.store,
        req.snapshot_id,
        scope=req.scope,
        obligation_ids=req.obligation_ids,
        receipts=svc.receipts,
        runs=functools.partial(queues.batch_results, svc.store),
        persist=functools.partial(
            queues.persist_runs_in, namespace=queue.namespace, reuse=req.reuse
        ),
        interface=svc.interface,
        # Who asked is the caller's operating-system identity, never a request field
        # (docs/ARCHITECTURE.md, "Principals and clearing").
        requested_by=svc.actor.name,
    )
    run_ids = claims.queued_run_ids(report)
    if report.batch_id is not None and run_ids:
        queue.send(svc.store, report.batch_id, run_ids)
        queue.start(svc.store, run_ids)
    for batch_id in claims.batches_under_way(report):
        # An earlier recheck's runs left unfinished by a process that ended (an interrupted
        # CLI on the embedded store) are taken up here; a run a live thread still holds is
        # refused by its lease. On a farm this sends nothing: its janitor re-sends.
        runs = queues.batch_results(svc.store, batch_id)
        unfinished = [r.run_id for r in runs if r.state != "done"]
        queue.start(svc.store, unfinished)
    return report
