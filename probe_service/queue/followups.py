"""What follows a finished run: the recheck its batch belongs to settles.

docs/ARCHITECTURE.md, "Recheck": a recheck's batch settles when its last run is done,
wherever that run ran — on a farm worker or on the embedded queue's threads — so every
context that finishes runs calls ``after_run`` (``WorkerContext.after_run``). Settling is
exactly-once however many finish at the same time (``claims.settle``); a settlement that
fails here (the store went away) is left to the next poll, never retried in a loop: the
run itself is already done.
"""

from __future__ import annotations

import logging

from ..errors import ProbeServiceError
from ..store import Store
from .submit import batch_results

__all__ = ["after_run"]

log = logging.getLogger(__name__)


def after_run(store: Store, run_id: str, settled_by: str) -> None:
    """Settle the recheck whose rerun ``run_id`` is, if it is one and its batch is done."""
    # Imported here: the claims part is needed only by the runs of a recheck.
    from ..claims import recheck_batch_of_run, settle_recheck, store_receipts

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
