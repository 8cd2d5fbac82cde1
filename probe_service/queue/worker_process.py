"""One worker process: a dramatiq Worker on our broker, plus the janitor thread.

Started by ``byte-probe worker`` (the supervisor), one per ``--processes``; runnable
alone as ``python -m probe_service.queue.worker_process``.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import dramatiq

from ..errors import ProbeServiceError, SandboxUnavailable, StoreUnavailable
from ..plans.execution import RuntimeBackend
from ..sandbox import SandboxRuntime, locate_runtime
from ..settings import REDIS_URL_ENV, Settings, read_settings
from ..store import Store, open_store
from .broker import DEFAULT_QUEUE, ProbeQueue
from .execute import WorkerContext, execute_run, reap_runs
from .heartbeats import note_alive, note_gone

__all__ = ["janitor_tick", "main"]

log = logging.getLogger("byte-probe.worker")


def _context(
    settings: Settings,
    root: Path,
    runtime: SandboxRuntime | None,
    after_run: Callable[[Store, str, str], None] | None,
    threads: int,
) -> WorkerContext:
    """The worker's context over the store under ``root`` (or ``PROBE_DATABASE_URL``), with
    its leases, attempts, re-send delay and namespace from the settings."""
    ctx = WorkerContext(
        store=open_store(root, settings.database_url),
        backend=RuntimeBackend(runtime, settings.sandbox_dir),
        settings=settings,
        lease_ms=settings.lease_ms,
        max_attempts=settings.max_attempts,
        resend_after_ms=settings.resend_after_ms,
        namespace=settings.redis_namespace,
        threads=threads,
    )
    if after_run is not None:
        ctx.after_run = after_run
    return ctx


def _note_alive(ctx: WorkerContext, queues: Sequence[str]) -> None:
    """Tell the farm this worker can confirm a refutation sent to ``queues``
    (docs/ARCHITECTURE.md, "Confirming a refutation"); without a sandbox it cannot."""
    if isinstance(ctx.backend, RuntimeBackend) and ctx.backend.runtime is not None:
        note_alive(ctx.store, ctx.owner, ctx.namespace, queues)


def _janitor(
    ctx: WorkerContext,
    queue: ProbeQueue,
    queues: Sequence[str],
    stop: threading.Event,
    every_s: float,
) -> None:
    while not stop.wait(every_s):
        janitor_tick(ctx, queue, queues)


def janitor_tick(ctx: WorkerContext, queue: ProbeQueue, queues: Sequence[str]) -> None:
    """One janitor pass: note this worker alive, reap lost runs, re-send stale ones; a
    failure is logged (the next tick tries again) and a store outage shows on the
    worker's ``store_up`` gauge (docs/ARCHITECTURE.md, "Metrics")."""
    try:
        _note_alive(ctx, queues)
        counts = reap_runs(ctx, queue.enqueue)
    except ProbeServiceError as exc:
        ctx.counters.store_up = not isinstance(exc, StoreUnavailable)
        log.warning("janitor: %s", exc)
        return
    ctx.counters.store_up = True
    if any(counts.values()):
        log.info("janitor: %s", counts)


def main(
    argv: list[str] | None = None, after_run: Callable[[Store, str, str], None] | None = None
) -> int:
    """Run one worker process until SIGTERM/SIGINT; return its exit code."""
    parser = argparse.ArgumentParser(prog="byte-probe-worker")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--queues", nargs="*", default=[DEFAULT_QUEUE])
    # The state directory comes as an argument, never through the environment.
    parser.add_argument("--root", type=Path, default=Path("."))
    # This process's own counters (docs/ARCHITECTURE.md, "Metrics"); 0: not served.
    parser.add_argument("--metrics-port", type=int, default=0)
    parser.add_argument("--metrics-host", default="127.0.0.1")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s[%(process)d] %(message)s")
    try:
        settings = read_settings()
    except ProbeServiceError as exc:
        log.error("%s", exc)
        return 3
    url = settings.redis_url
    if not url:
        log.error("%s is not set; a worker needs a Redis broker", REDIS_URL_ENV)
        return 3
    try:
        runtime: SandboxRuntime | None = locate_runtime(settings.sandbox_dir)
    except SandboxUnavailable as exc:
        # Runs still end, inconclusive with this reason, instead of waiting forever.
        log.error("sandbox unavailable (%s): %s", exc.reason, exc)
        runtime = None
    # The context and the broker take the namespace from the same settings, so this
    # worker executes and re-sends only the runs submitted to the queue it consumes.
    namespace = settings.redis_namespace
    ctx = _context(settings, args.root, runtime, after_run, args.threads)
    if args.metrics_port:
        from .metrics import serve_worker_metrics

        serve_worker_metrics(args.metrics_port, ctx.counters, host=args.metrics_host)
        log.info("worker %s metrics on %s:%d", ctx.owner, args.metrics_host, args.metrics_port)

    def handle(run_id: str) -> None:
        outcome = execute_run(ctx, run_id)
        log.info("run %s: %s", run_id, outcome)

    queue = ProbeQueue(url, namespace=namespace, queue_name=args.queues[0], handler=handle)
    ctx.queue = queue  # a refutation goes back to it for another worker to confirm
    for queue_name in args.queues[1:]:
        ProbeQueue(url, queue_name=queue_name, handler=handle, broker=queue.broker)
    worker = dramatiq.Worker(queue.broker, queues=set(args.queues), worker_threads=args.threads)
    worker.queue_prefetch = args.threads  # dramatiq's default of 2x threads hoards messages
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    _note_alive(ctx, args.queues)
    worker.start()
    janitor_every = settings.janitor_interval_ms / 1000
    janitor = threading.Thread(
        target=_janitor, args=(ctx, queue, args.queues, stop, janitor_every), daemon=True
    )
    janitor.start()
    log.info("worker %s ready: %d threads on %s", ctx.owner, args.threads, args.queues)
    stop.wait()
    worker.stop()
    try:
        note_gone(ctx.store, ctx.owner)
    except ProbeServiceError as exc:
        log.warning("could not remove this worker's heartbeat: %s", exc)
    queue.close()
    ctx.store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
