"""The embedded mode: no broker; the same actor body runs on threads in this process.

``InlineQueue`` is the ``Queue`` (queue/dispatch.py) a session gets without
``PROBE_REDIS_URL``: a submitted batch's runs stay in the store until this process executes
them (``execute_submitted``), and a single run executes here, without a run row, as an
embedded ``probe_run`` always has.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from ..errors import InvalidInput, SandboxUnavailable
from ..settings import Settings
from ..store import Store

if TYPE_CHECKING:
    from ..plans import ProbeRunResult
    from ..plans.backend import SandboxBackend
    from .broker import ProbeQueue

__all__ = ["InlineQueue", "run_inline"]


class InlineQueue:
    """The queue of a session without a broker: runs execute in this process, through
    ``backend`` (the real sandbox unless a test passes another; docs/ARCHITECTURE.md,
    "Seams")."""

    embedded = True

    def __init__(self, settings: Settings, backend: SandboxBackend | None = None) -> None:
        self.settings = settings
        self.backend = backend
        self._started: list[threading.Thread] = []
        self._lock = threading.Lock()

    @property
    def namespace(self) -> str:
        """The namespace runs are stored under: the one a farm's janitor would serve."""
        return self.settings.redis_namespace

    def send(self, store: Store, batch_id: str, run_ids: Sequence[str]) -> int:
        """Send nothing: the runs wait in the store (``execute_submitted``, or a worker
        after ``byte-probe submit --resume``)."""
        return 0

    def execute_submitted(self, store: Store, run_ids: Sequence[str], threads: int) -> None:
        """Execute the submitted runs here, on ``threads`` threads."""
        run_inline(store, run_ids, threads, self.settings, self.backend)

    def start_submitted(self, store: Store, run_ids: Sequence[str], threads: int) -> None:
        """Execute the submitted runs here on a thread of their own and return at once: an
        agent polls their batch (``batch_status``); ``close`` waits for them."""
        thread = threading.Thread(
            target=run_inline,
            args=(store, list(run_ids), threads, self.settings, self.backend),
            name="byte-probe-inline-batch",
        )
        with self._lock:
            self._started = [t for t in self._started if t.is_alive()]
            self._started.append(thread)
        thread.start()

    def require_broker(self, refusal: str) -> ProbeQueue:
        """Raise InvalidInput(``refusal``): there is no broker to send to."""
        raise InvalidInput(refusal)

    def run_plan(
        self,
        store: Store,
        plan_id: str,
        policy_id: str,
        *,
        reuse: bool,
        timeout_s: float,
        on_progress: Callable[[dict[str, int]], None] | None,
    ) -> ProbeRunResult:
        """Run one stored plan here, now (``timeout_s`` and ``on_progress`` are for a queue
        with workers). Raises NotFound, PolicyError or KeyFileError."""
        from ..plans import run_configured

        return run_configured(
            store, self.settings, plan_id, policy_id, reuse=reuse, backend=self.backend
        )

    def close(self) -> None:
        """Wait for the runs ``start_submitted`` started: they end with their receipts."""
        with self._lock:
            started, self._started = self._started, []
        for thread in started:
            thread.join()


def run_inline(
    store: Store,
    run_ids: Sequence[str],
    threads: int = 2,
    settings: Settings | None = None,
    backend: SandboxBackend | None = None,
) -> list[str]:
    """Execute queued runs in-process with ``threads`` workers through ``backend`` (the
    real sandbox by default); return each run's result."""
    from ..plans.execution import RuntimeBackend
    from ..sandbox import SandboxRuntime, locate_runtime
    from ..settings import read_settings
    from .execute import WorkerContext, execute_run

    settings = settings or read_settings()
    if backend is None:
        try:
            runtime: SandboxRuntime | None = locate_runtime(settings.sandbox_dir)
        except SandboxUnavailable:
            runtime = None  # each run then ends inconclusive with the runtime's own reason
        backend = RuntimeBackend(runtime, settings.sandbox_dir)
    # The runs were stored under the settings' namespace by the same process's submit.
    ctx = WorkerContext(
        store=store, backend=backend, settings=settings, namespace=settings.redis_namespace
    )
    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        return list(pool.map(lambda run_id: execute_run(ctx, run_id), run_ids))
