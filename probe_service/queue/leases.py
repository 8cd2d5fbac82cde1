"""One lease keeper per worker: a single thread renews the leases of every run it holds.

A thread per run cost a thread start and join on every run (docs/ARCHITECTURE.md,
"Lean store path"); one keeper renews all held leases in one UPDATE per tick, every
third of the lease length, and stops when the worker holds none.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from sqlalchemy import update

from ..errors import InfrastructureError
from ..store import Store
from .runs import now_ms
from .tables import runs

__all__ = ["LeaseKeeper", "renew_leases"]

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


class LeaseKeeper:
    """Renews the leases of the runs held through ``holding`` from one shared thread."""

    def __init__(self, store: Store, owner: str, lease_ms: int) -> None:
        self.store, self.owner, self.lease_ms = store, owner, lease_ms
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
                renew_leases(self.store, held, self.owner, self.lease_ms)
            except InfrastructureError:
                log.warning("lease renewal of %d run(s) failed; will retry", len(held))
