"""One lease keeper per worker: a single thread renews the leases of every run it holds.

A thread per run cost a thread start and join on every run (docs/ARCHITECTURE.md,
"Lean store path"); one keeper renews all held leases in one UPDATE per tick, every
third of the lease length, and stops when the worker holds none. A held run the UPDATE
no longer matches, and that is not done, was taken from this worker (its lease expired
while it stalled): counted once as a lost lease (docs/ARCHITECTURE.md, "Metrics").
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from sqlalchemy import select, update

from ..errors import InfrastructureError
from ..store import Store
from .counters import WorkerCounters
from .runs import now_ms
from .tables import runs

__all__ = ["LeaseKeeper", "lost_leases", "renew_leases"]

log = logging.getLogger(__name__)


def renew_leases(store: Store, run_ids: Sequence[str], owner: str, lease_ms: int) -> int:
    """Extend this owner's leases on ``run_ids`` in one statement; return how many held."""
    with store.transaction() as conn:
        return int(
            conn.execute(
                update(runs)
                .where(
                    runs.c.run_id.in_(list(run_ids)),
                    runs.c.state == "running",
                    runs.c.lease_owner == owner,
                )
                .values(lease_expires_ms=now_ms() + lease_ms)
            ).rowcount
        )


def lost_leases(store: Store, run_ids: Sequence[str], owner: str) -> set[str]:
    """Which of ``run_ids`` are neither done nor running under ``owner``'s lease."""
    with store.reading() as conn:
        kept = conn.execute(
            select(runs.c.run_id).where(
                runs.c.run_id.in_(list(run_ids)),
                (runs.c.state == "done")
                | ((runs.c.state == "running") & (runs.c.lease_owner == owner)),
            )
        ).scalars()
        return set(run_ids) - set(kept)


class LeaseKeeper:
    """Renews the leases of the runs held through ``holding`` from one shared thread."""

    def __init__(
        self, store: Store, owner: str, lease_ms: int, counters: WorkerCounters | None = None
    ) -> None:
        self.store, self.owner, self.lease_ms = store, owner, lease_ms
        self.counters = counters or WorkerCounters(owner)
        #: Held runs already counted as lost (each is counted once).
        self._lost: set[str] = set()
        self._held: set[str] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @contextmanager
    def holding(self, run_id: str) -> Iterator[None]:
        """Keep ``run_id``'s lease alive while the block runs."""
        with self._lock:
            self._held.add(run_id)
            if self._thread is None:
                self._thread = threading.Thread(target=self._renew, name="leases", daemon=True)
                self._thread.start()
        try:
            yield
        finally:
            with self._lock:
                self._held.discard(run_id)
                self._lost.discard(run_id)

    def held(self) -> list[str]:
        """The run ids whose leases are being kept."""
        with self._lock:
            return sorted(self._held)

    def _renew(self) -> None:
        stop = threading.Event()
        while not stop.wait(self.lease_ms / 3000):
            with self._lock:
                held = sorted(self._held)
                if not held:
                    self._thread = None  # the next hold starts a fresh thread
                    return
            try:
                self.renew(held)
            except InfrastructureError:
                log.warning("lease renewal of %d run(s) failed; will retry", len(held))

    def renew(self, held: Sequence[str]) -> int:
        """Renew the leases on ``held`` once (one tick), counting each newly lost one;
        return how many held. Raises StoreUnavailable when the store fails."""
        renewed = renew_leases(self.store, held, self.owner, self.lease_ms)
        if renewed == len(held):
            return renewed
        lost = lost_leases(self.store, held, self.owner)
        with self._lock:
            new = (lost & self._held) - self._lost  # a run that ended since is not lost
            self._lost |= new
        if new:
            log.warning("lease lost on %d run(s): %s", len(new), sorted(new))
            self.counters.add("leases_lost", len(new))
        return renewed
