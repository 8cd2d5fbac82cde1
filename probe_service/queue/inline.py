"""The embedded mode: no broker; the same actor body runs on threads in this process.

``InlineQueue`` is the ``Queue`` (queue/dispatch.py) a session gets without
``PROBE_REDIS_URL``: a submitted batch's runs stay in the store until this process executes
them (``execute_submitted``), and a single run executes here, without a run row, as an
embedded ``probe_run`` always has.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from ..errors import InvalidInput, SandboxUnavailable
from ..settings import Settings
from ..store import Store

if TYPE_CHECKING:
    from ..plans import ProbeRunResult
    from .broker import ProbeQueue

__all__ = ["InlineQueue", "run_inline"]


class InlineQueue:
    """The queue of a session without a broker: runs execute in this process."""

    embedded = True

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

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
        run_inline(store, run_ids, threads, self.settings)

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

        return run_configured(store, self.settings, plan_id, policy_id, reuse=reuse)

    def close(self) -> None:
        """Nothing to close."""


def run_inline(
    store: Store, run_ids: Sequence[str], threads: int = 2, settings: Settings | None = None
) -> list[str]:
    """Execute queued runs in-process with ``threads`` workers; return each run's result."""
    from ..sandbox import SandboxRuntime, locate_runtime
    from ..settings import read_settings
    from .execute import WorkerContext, execute_run

    settings = settings or read_settings()
    try:
        runtime: SandboxRuntime | None = locate_runtime(settings.sandbox_dir)
    except SandboxUnavailable:
        runtime = None  # each run then ends inconclusive with the runtime's own reason
    # The runs were stored under the settings' namespace by the same process's submit.
    ctx = WorkerContext(
        store=store, runtime=runtime, settings=settings, namespace=settings.redis_namespace
    )
    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        return list(pool.map(lambda run_id: execute_run(ctx, run_id), run_ids))
