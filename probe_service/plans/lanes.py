"""Launch lanes: how many runs of one process may be inside the sandbox at once.

docs/ARCHITECTURE.md, "Pipelined worker": a worker has more threads than lanes, so the
store work of some runs (take, prepare, materialize, judge, finish) overlaps the launches
of others, while the launches themselves -- the CPU-bound part -- never outnumber the
lanes. A backend enters the request's lane around the sandboxed launch only
(``backend.launch_lane``); everything before and after it runs outside.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import InvalidInput

__all__ = ["LaunchLanes"]


class LaunchLanes:
    """At most ``count`` holders at once; the rest wait their turn, in no promised order."""

    def __init__(self, count: int) -> None:
        """Raises InvalidInput when ``count`` is below 1."""
        if count < 1:
            raise InvalidInput(f"lanes: {count} is below 1; a worker needs at least one lane")
        self.count = count
        self._free = threading.Semaphore(count)
        self._lock = threading.Lock()
        #: Lanes held now, and the most ever held at once (for doctor-style reports and tests).
        self.busy = 0
        self.peak = 0
        #: Launches that went through a lane, in all.
        self.entered = 0

    @contextmanager
    def hold(self) -> Iterator[None]:
        """Hold one lane for the block, waiting for one to free first."""
        with self._free:
            with self._lock:
                self.busy += 1
                self.entered += 1
                self.peak = max(self.peak, self.busy)
            try:
                yield
            finally:
                with self._lock:
                    self.busy -= 1
