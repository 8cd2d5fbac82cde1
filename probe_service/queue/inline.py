"""The embedded mode: the same actor body, run by threads in this process (no Redis)."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from ..errors import SandboxUnavailable
from ..plans.backend import SandboxBackend
from ..plans.execution import RuntimeBackend
from ..sandbox import SandboxRuntime, locate_runtime
from ..store import Store
from .execute import WorkerContext, execute_run
from .runs import configured_namespace

__all__ = ["run_inline"]


def run_inline(
    store: Store,
    run_ids: Sequence[str],
    threads: int = 2,
    backend: SandboxBackend | None = None,
) -> list[str]:
    """Execute queued runs in-process with ``threads`` workers through ``backend`` (the
    real sandbox by default); return each run's result."""
    if backend is None:
        try:
            runtime: SandboxRuntime | None = locate_runtime()
        except SandboxUnavailable:
            runtime = None  # each run then ends inconclusive with the runtime's own reason
        backend = RuntimeBackend(runtime)
    # The runs were stored under the configured namespace by the same process's submit.
    ctx = WorkerContext(store=store, backend=backend, namespace=configured_namespace())
    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        return list(pool.map(lambda run_id: execute_run(ctx, run_id), run_ids))
