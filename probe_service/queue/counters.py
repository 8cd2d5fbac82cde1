"""One worker process's own counters: what it executed, retried, lost and requeued.

docs/ARCHITECTURE.md, "Metrics": the store-wide figures (runs by state and outcome, the
histograms) are the same from every process, so exactly one endpoint exports them
(``byte-probe metrics``); each worker process exports only what happened in it, labelled
with its worker name (the lease owner, ``host:pid``), so a Prometheus ``sum()`` over
every worker target is the farm's total. Plain integers under one lock: counting never
imports Prometheus (``metrics.py`` renders them at scrape time).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["COUNTERS", "WorkerCounters"]

#: Each counter's name (exported as ``byte_probe_worker_<name>_total``) and its help.
COUNTERS = {
    "runs_executed": "Runs this worker took and ended (any outcome, reused or executed)",
    "run_reattempts": "Runs this worker took on a later attempt (an earlier worker was lost)",
    "retries": "Deliveries this worker gave back to the broker on an infrastructure error",
    "leases_lost": "Runs whose lease this worker held and found taken from it",
    "requeues": "Runs with an expired lease this worker's janitor put back on the queue",
    "resends": "Queued runs whose message this worker's janitor sent again",
    "runs_lost": "Runs this worker ended worker_lost (out of attempts)",
}


class WorkerCounters:
    """The counters of one worker (``worker``: its lease owner name) and its busy threads."""

    def __init__(self, worker: str, threads: int = 1) -> None:
        self.worker = worker
        self.threads = threads
        self._counts = dict.fromkeys(COUNTERS, 0)
        self._busy = 0
        #: Whether this worker's last note in the store (its janitor's tick) went through.
        self.store_up = True
        self._lock = threading.Lock()

    def add(self, name: str, n: int = 1) -> None:
        """Add ``n`` to counter ``name``. Raises KeyError for a name not in COUNTERS."""
        if n < 0:
            raise ValueError(f"{name}: a counter only grows (got {n})")
        with self._lock:
            self._counts[name] += n

    @contextmanager
    def busy(self) -> Iterator[None]:
        """Count one more busy thread while the block runs."""
        with self._lock:
            self._busy += 1
        try:
            yield
        finally:
            with self._lock:
                self._busy -= 1

    def snapshot(self) -> tuple[dict[str, int], int]:
        """The counters and the busy threads, read together."""
        with self._lock:
            return dict(self._counts), self._busy
