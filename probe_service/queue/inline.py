"""The embedded mode: no broker; the same actor body runs on threads in this process.

``InlineQueue`` is the ``Queue`` (queue/dispatch.py) a session gets without
``PROBE_REDIS_URL``: a submitted batch's runs stay in the store until this process executes
them (``execute_submitted``), and a single run executes here, without a run row, as an
embedded ``probe_run`` always has.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import TYPE_CHECKING

from ..errors import InvalidInput, SandboxUnavailable
from ..settings import Settings
from ..store import Store

if TYPE_CHECKING:
    from ..plans import ProbeRunResult
    from ..plans.backend import SandboxBackend
    from .broker import ProbeQueue
    from .execute import WorkerContext

__all__ = ["TAKE_BATCH", "InlineQueue", "run_inline"]

#: Runs one lane of the embedded mode takes per transaction (docs/ARCHITECTURE.md, "Lean
#: store path"): one round trip leases them all, and a lane never holds more waiting
#: runs than it finishes in a few seconds.
TAKE_BATCH = 8


class InlineQueue:
    """The queue of a session without a broker: runs execute in this process, through
    ``backend`` (the real sandbox unless a test passes another; docs/ARCHITECTURE.md,
    "Seams")."""

    embedded = True

    def __init__(self, settings: Settings, backend: SandboxBackend | None = None) -> None:
        self.settings = settings
        self.backend = backend

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
        """Nothing to close."""


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
    from .execute import WorkerContext

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
    lanes = max(1, threads)
    size = max(1, min(TAKE_BATCH, -(-len(run_ids) // lanes)))
    chunks = [list(run_ids[i : i + size]) for i in range(0, len(run_ids), size)]
    with ThreadPoolExecutor(max_workers=lanes) as pool:
        return [r for done in pool.map(lambda c: _run_chunk(ctx, c), chunks) for r in done]


def _run_chunk(ctx: WorkerContext, run_ids: list[str]) -> list[str]:
    """Take ``run_ids`` in one transaction and run those taken, one after another, their
    leases kept while they wait; a run not taken answers as ``execute_run`` says why."""
    from .execute import execute_run, execute_taken
    from .take import take_runs

    taken = {
        t.run.run_id: t
        for t in take_runs(ctx.store, run_ids, ctx.owner, ctx.lease_ms, namespace=ctx.namespace)
    }
    with ExitStack() as held:
        for run_id in taken:
            held.enter_context(ctx.leases.holding(run_id))
        return [
            execute_taken(ctx, taken[run_id]) if run_id in taken else execute_run(ctx, run_id)
            for run_id in run_ids
        ]
