"""``byte-probe worker``: start N worker processes, restart any that dies, stop on signal.

dramatiq's own CLI shuts every process down when one dies; a probe farm wants the
opposite (a process killed mid-probe is replaced, and its run is reaped by lease).
Worker process ``i`` serves its own counters on ``metrics_port + i`` (a replacement on
the same port), so each is one Prometheus target (docs/ARCHITECTURE.md, "Metrics").
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["WorkerMetrics", "run_supervisor"]

log = logging.getLogger("byte-probe.supervisor")

#: The module each worker process runs.
WORKER_MODULE = "probe_service.service.worker_process"

#: Seconds a stopping worker gets to finish its current probe before SIGKILL.
STOP_GRACE_S = 30.0
RESTART_BACKOFF_S = 1.0


@dataclass(frozen=True)
class WorkerMetrics:
    """Where the worker processes serve their counters: process ``i`` on ``port + i``;
    port 0 serves none."""

    port: int = 0
    host: str = "127.0.0.1"

    def argv(self, index: int) -> list[str]:
        """The worker process arguments of process ``index``."""
        if not self.port:
            return []
        return ["--metrics-port", str(self.port + index), "--metrics-host", self.host]


def _spawn(
    threads: int,
    queues: Sequence[str],
    root: Path,
    env: Mapping[str, str],
    metrics: list[str],
) -> subprocess.Popen[bytes]:
    # The state directory is an argument and the environment the settings' copy: nothing
    # passes from this process to a worker through the environment but the settings.
    # The service's entry (service/worker_process.py) wraps queue.worker_process with what
    # follows each run; named, not imported, so this part stays below the service.
    argv = [sys.executable, "-m", WORKER_MODULE, "--threads", str(threads)]
    argv += ["--root", str(root), *metrics]
    return subprocess.Popen([*argv, "--queues", *queues], env=dict(env))


def run_supervisor(
    processes: int,
    threads: int,
    queues: Sequence[str],
    stop: threading.Event | None = None,
    *,
    root: Path,
    env: Mapping[str, str],
    metrics: WorkerMetrics | None = None,
) -> int:
    """Keep ``processes`` workers alive until SIGTERM/SIGINT (or ``stop``); return 0.

    Each worker process serves the store under ``root`` (``--root``; ``PROBE_DATABASE_URL``
    in ``env`` wins) and starts with exactly ``env`` (the settings' frozen copy); with
    ``metrics``, process ``i`` serves its counters on ``metrics.port + i``."""
    stop = stop or threading.Event()
    metrics = metrics or WorkerMetrics()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
    children = [_spawn(threads, queues, root, env, metrics.argv(i)) for i in range(processes)]
    log.info("started %d worker processes: %s", processes, [c.pid for c in children])
    while not stop.wait(0.5):
        for i, child in enumerate(children):
            code = child.poll()
            if code is not None:
                log.warning("worker %d exited with %s; restarting", child.pid, code)
                time.sleep(RESTART_BACKOFF_S)
                children[i] = _spawn(threads, queues, root, env, metrics.argv(i))
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    for child in children:
        try:
            child.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    return 0
