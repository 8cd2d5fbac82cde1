"""What follows a finished run: the recheck its batch belongs to settles.

docs/ARCHITECTURE.md, "Recheck": a recheck's batch settles when its last run is done,
wherever that run ran — on a farm worker or on the embedded queue's threads — so every
context that finishes runs calls ``after_run`` (``WorkerContext.after_run``, handed in by
the service: the queue part never imports the claims part, docs/ARCHITECTURE.md "Layers";
the worker processes start through ``service/worker_process.py``). Settling is
exactly-once however many finish at the same time (``claims.settle``); a settlement that
fails here (the store went away) is left to the next poll, never retried in a loop: the
run itself is already done.
"""

from __future__ import annotations

import logging

from ..claims import recheck_batch_of_run, settle_recheck, store_receipts
from ..errors import ProbeServiceError
from ..principals import acting_as, service_actor
from ..queue import batch_results
from ..store import Store

__all__ = ["after_run"]

log = logging.getLogger(__name__)


def after_run(store: Store, run_id: str, settled_by: str) -> None:
    """Settle the recheck whose rerun ``run_id`` is, if it is one and its batch is done.

    The worker writes as the service (docs/ARCHITECTURE.md, "Principals and clearing"),
    under the name it settles by, whoever queued the run."""
    with acting_as(service_actor(settled_by)):
        _settle(store, run_id, settled_by)


def _settle(store: Store, run_id: str, settled_by: str) -> None:
    try:
        batch_id = recheck_batch_of_run(store, run_id)
        if batch_id is None:
            return
        report = settle_recheck(
            store,
            batch_id,
            batch_results(store, batch_id),
            store_receipts(store),
            settled_by=settled_by,
        )
    except ProbeServiceError as exc:
        log.warning("run %s: its recheck is not settled yet (%s); a poll settles it", run_id, exc)
        return
    if report is not None and report.settled:
        log.info("recheck %s: settled (%s)", batch_id, report.counts)
