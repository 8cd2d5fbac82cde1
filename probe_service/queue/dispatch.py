"""The ``Queue`` seam: where a submitted run goes (docs/ARCHITECTURE.md, "Queue").

Two implementations, chosen once from the settings by ``open_queue``: ``ProbeQueue``
(queue/broker.py) sends each run id to Redis for any worker; ``InlineQueue``
(queue/inline.py, the embedded mode) keeps the runs in the store and executes them in this
process. Callers never branch on which one they hold.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from ..settings import Settings
from ..store import Store

if TYPE_CHECKING:
    from ..plans import ProbeRunResult
    from ..plans.backend import SandboxBackend
    from .broker import ProbeQueue
    from .status import RunStatus

__all__ = ["Queue", "open_queue"]


class Queue(Protocol):
    """Where runs go once they are persisted, and how one run is served."""

    #: True when runs execute in this process (no broker).
    embedded: bool

    @property
    def namespace(self) -> str:
        """The queue namespace runs are stored under (docs/ARCHITECTURE.md, "Queue
        namespaces")."""
        ...

    def send(self, store: Store, batch_id: str, run_ids: Sequence[str]) -> int:
        """Hand persisted runs to whoever executes them; return how many were sent.

        Raises BrokerUnavailable (naming the batch to resume) when a broker fails."""
        ...

    def execute_submitted(self, store: Store, run_ids: Sequence[str], threads: int) -> None:
        """Execute the submitted runs in this process when no worker will."""
        ...

    def start(self, store: Store, run_ids: Sequence[str]) -> object:
        """Begin executing the submitted runs in this process, without waiting, when no
        worker will (``close`` waits for them); nothing when a broker sent them."""
        ...

    def admit(self, store: Store, policy_id: str) -> None:
        """Refuse, before any run row is written, runs this queue could never execute
        under ``policy_id`` (PolicyError naming it); a broker's workers read their own
        policy file, so a broker admits every id."""
        ...

    def require_broker(self, refusal: str) -> ProbeQueue:
        """The broker behind this queue; raises InvalidInput(``refusal``) without one."""
        ...

    def run_plan(
        self,
        store: Store,
        plan_id: str,
        policy_id: str,
        *,
        reuse: bool,
        timeout_s: float | None,
        on_progress: Callable[[dict[str, int]], None] | None,
    ) -> ProbeRunResult | RunStatus:
        """Run one stored plan (here, or on a worker) and wait at most ``timeout_s`` (None:
        to its end) for its result; the run's status (its id to poll) when the wait
        expires first, the run going on (docs/ARCHITECTURE.md, "Asynchronous runs")."""
        ...

    def close(self) -> None:
        """Wait for the runs this process executes, then release the connections."""
        ...


def open_queue(settings: Settings, backend: SandboxBackend | None = None) -> Queue:
    """The broker ``PROBE_REDIS_URL`` names, else the embedded queue, whose runs execute
    here through ``backend`` (nothing connects before a message is sent)."""
    if settings.redis_url:
        from .broker import ProbeQueue

        return ProbeQueue(settings.redis_url, namespace=settings.redis_namespace)
    from .inline import InlineQueue

    return InlineQueue(settings, backend)
