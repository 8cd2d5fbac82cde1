"""The embedded mode: no broker; the same actor body runs on threads in this process.

``InlineQueue`` is the ``Queue`` (queue/dispatch.py) a session gets without
``PROBE_REDIS_URL``: a submitted batch's runs stay in the store until this process executes
them (``execute_submitted`` in the foreground, ``start`` in the background). A single run
with no bound on its wait executes here, without a run row, as an embedded ``probe_run``
always has; with a bounded wait it is a run row executed in the background
(docs/ARCHITECTURE.md, "Asynchronous runs"): the caller gets its status when the wait
expires and the run keeps going, pollable from any face over the same store. ``close``
waits for every background run to write its receipt, so none is abandoned while its
process lives.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import ExitStack
from typing import TYPE_CHECKING

from ..errors import InvalidInput, SandboxUnavailable
from ..settings import Settings
from ..store import Store

#: What follows a run that ended here (``WorkerContext.after_run``).
AfterRun = Callable[[Store, str, str], None]

if TYPE_CHECKING:
    from ..plans import ProbeRunResult
    from ..plans.backend import SandboxBackend
    from .broker import ProbeQueue
    from .execute import WorkerContext
    from .status import RunStatus

__all__ = ["BACKGROUND_THREADS", "TAKE_BATCH", "InlineQueue", "run_inline"]

#: Runs one lane of the embedded mode takes per transaction (docs/ARCHITECTURE.md, "Lean
#: store path"): one round trip leases them all, and a lane never holds more waiting
#: runs than it finishes in a few seconds.
TAKE_BATCH = 8

log = logging.getLogger(__name__)

#: Runs the embedded queue executes at once in the background (as a host runs 2 long
#: operations at once); more wait their turn as queued runs.
BACKGROUND_THREADS = 2


class InlineQueue:
    """The queue of a session without a broker: runs execute in this process, through
    ``backend`` (the real sandbox unless a test passes another; docs/ARCHITECTURE.md,
    "Seams")."""

    embedded = True

    def __init__(
        self,
        settings: Settings,
        backend: SandboxBackend | None = None,
        after_run: AfterRun | None = None,
    ) -> None:
        self.settings = settings
        self.after_run = after_run
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._context: WorkerContext | None = None
        self.backend = backend

    @property
    def namespace(self) -> str:
        """The namespace runs are stored under: the one a farm's janitor would serve."""
        return self.settings.redis_namespace

    def send(self, store: Store, batch_id: str, run_ids: Sequence[str]) -> int:
        """Send nothing: the runs wait in the store (``execute_submitted``, ``start``, or a
        worker after ``byte-probe submit --resume``)."""
        return 0

    def execute_submitted(self, store: Store, run_ids: Sequence[str], threads: int) -> None:
        """Execute the submitted runs here, on ``threads`` threads."""
        run_inline(store, run_ids, threads, self.settings, self.backend)

    def start(self, store: Store, run_ids: Sequence[str]) -> list[Future[str]]:
        """Execute the submitted runs here in the background, ``BACKGROUND_THREADS`` at
        once, and return at once; ``close`` waits for them."""
        from .execute import execute_run

        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(BACKGROUND_THREADS, "embedded-run")
            if self._context is None or self._context.store is not store:
                self._context = _context(store, self.settings, self.backend)
                if self.after_run is not None:
                    self._context.after_run = self.after_run
            context, pool = self._context, self._pool
            futures = [pool.submit(execute_run, context, run_id) for run_id in run_ids]
        for future in futures:
            future.add_done_callback(_log_failure)
        return futures

    def admit(self, store: Store, policy_id: str) -> None:
        """Refuse runs this process could not execute, before a run row exists: the runs
        execute here, so the policy must be in this session's policy file. Raises
        PolicyError naming ``policy_id`` (or the file's own refusal), or KeyFileError."""
        from ..plans import run_configuration
        from ..policies import find_policy

        find_policy(run_configuration(self.settings, store).policy_file, policy_id)

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
        timeout_s: float | None,
        on_progress: Callable[[dict[str, int]], None] | None,
    ) -> ProbeRunResult | RunStatus:
        """Run one stored plan here: now, to its end, when ``timeout_s`` is None; else as a
        background run, returning its result if it ends within ``timeout_s`` and its status
        (the run id to poll) if not. Raises NotFound, PolicyError or KeyFileError before
        anything is written."""
        from ..plans import run_configured

        if timeout_s is None:
            return run_configured(
                store, self.settings, plan_id, policy_id, reuse=reuse, backend=self.backend
            )
        from .queued_run import settled, submit_one
        from .status import read_run_status

        self.admit(store, policy_id)
        _, run_id = submit_one(store, self, plan_id, policy_id, reuse)
        (future,) = self.start(store, [run_id])
        wait([future], timeout=timeout_s)
        return settled(read_run_status(store, run_id))

    def close(self) -> None:
        """Wait for every background run to end (each is bounded by its policy's timeout),
        then release the pool."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)


def _log_failure(future: Future[str]) -> None:
    """Log a background run the store or broker failed (its row stays ``running`` until
    its lease expires, and ``run_status`` says so)."""
    error = future.exception()
    if error is not None:
        log.error("embedded run failed: %s: %s", type(error).__name__, error)


def _context(
    store: Store, settings: Settings, backend: SandboxBackend | None = None
) -> WorkerContext:
    """A worker context executing runs of ``store`` in this process through ``backend``
    (the real sandbox by default; docs/ARCHITECTURE.md, "Seams")."""
    from ..plans.execution import RuntimeBackend
    from ..sandbox import SandboxRuntime, locate_runtime
    from .execute import WorkerContext

    if backend is None:
        try:
            runtime: SandboxRuntime | None = locate_runtime(settings.sandbox_dir)
        except SandboxUnavailable:
            runtime = None  # each run then ends inconclusive with the runtime's own reason
        backend = RuntimeBackend(runtime, settings.sandbox_dir)
    # The runs were stored under the settings' namespace by the same process's submit.
    return WorkerContext(
        store=store, backend=backend, settings=settings, namespace=settings.redis_namespace
    )


def run_inline(
    store: Store,
    run_ids: Sequence[str],
    threads: int = 2,
    settings: Settings | None = None,
    backend: SandboxBackend | None = None,
) -> list[str]:
    """Execute queued runs in-process with ``threads`` workers through ``backend`` (the
    real sandbox by default); return each run's result."""
    from ..settings import read_settings

    ctx = _context(store, settings or read_settings(), backend)
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
