"""The local service: ``dispatch_check`` on an unchanged tree through a running
``byte-probe serve``, as its clients make it (docs/ARCHITECTURE.md, "Local service").

Three figures beside the in-process call of the same run: the call on an open connection
as root (no read check), the same call from uid 65534 (each capture checked in a child
that dropped to it), and the whole hook process (``byte-probe hook claude-code``: a new
interpreter, a connection, ``turn_current`` and ``dispatch_check``). The issue's goal is
50 ms for a hook's dispatch check.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from probe_service.faces.serve_client import ServiceClient

NOBODY = 65534


@contextmanager
def running_serve(state: Path, home: Path, sock: Path) -> Iterator[Path]:
    """``byte-probe serve`` over the store under ``state``, listening at ``sock``."""
    env = {"PATH": os.environ["PATH"], "HOME": str(home)}
    argv = [sys.executable, "-m", "probe_service.cli", "serve", "--root", str(state)]
    process = subprocess.Popen(
        [*argv, "--socket", str(sock)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.connect(str(sock))
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("byte-probe serve did not start") from None
                time.sleep(0.05)
            finally:
                probe.close()
        yield sock
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)


def _samples(call: Callable[[], object], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return times


def _as_uid(uid: int, work: Callable[[], list[float]]) -> list[float]:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            os.write(write_end, json.dumps(work()).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    samples: list[float] = json.loads(data)
    return samples


def serve_medians(
    state: Path, home: Path, root: Path, check: dict[str, Any], hook_event: bytes, repeat: int
) -> dict[str, float]:
    """Medians in seconds: ``connection`` (root, one open connection), ``as_nobody`` (uid
    65534, a connection per call, as the hook makes), ``hook`` (the hook process)."""
    sock = home.parent / "serve-bench.sock"
    with running_serve(state, home, sock):

        def call_on(client: ServiceClient) -> None:
            assert client.call("dispatch_check", check)["verdict"] == "allow"

        with ServiceClient(sock) as client:
            call_on(client)  # warm: the service's first capture of the tree
            connection = statistics.median(_samples(lambda: call_on(client), repeat))

        def fresh() -> None:
            with ServiceClient(sock) as client:
                call_on(client)

        nobody = statistics.median(_as_uid(NOBODY, lambda: _samples(fresh, repeat)))
        hook_argv = [sys.executable, "-m", "probe_service.cli", "hook", "claude-code"]
        hook_argv += ["--scope", "scope1", "--project", str(root)]
        env = {"PATH": os.environ["PATH"], "HOME": str(home), "PROBE_SERVE_SOCKET": str(sock)}

        def hook() -> None:
            done = subprocess.run(
                hook_argv, input=hook_event, env=env, capture_output=True, check=True
            )
            decision = json.loads(done.stdout)["hookSpecificOutput"]["permissionDecision"]
            assert decision == "allow", done.stdout

        hook_median = statistics.median(_samples(hook, max(3, repeat // 2)))
    return {"connection": connection, "as_nobody": nobody, "hook": hook_median}
