"""Run one argv with a wall-clock timeout and one shared stdout+stderr byte budget.

docs/ARCHITECTURE.md, "Runner": "Stdout and stderr are drained concurrently into one bounded
in-memory budget, and crossing it terminates the process group." The
runtime's own exit status is not trusted for this: srt exits 0 when its child
dies of SIGTERM, so timeout and output_limit are decided here.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from probe_service.sandbox.limits import RunCgroup

__all__ = ["MARKER_ENV", "STARTUP_TIMEOUT_SECONDS", "Bounded", "run_bounded"]

MARKER_ENV = "BYTE_PROBE_RUN_MARKER"
_CHUNK = 64 * 1024
_GRACE_SECONDS = 0.3


@dataclass
class _Drain:
    budget: int
    skip: int
    prefix: bytearray = field(default_factory=bytearray)
    out: bytearray = field(default_factory=bytearray)
    err: bytearray = field(default_factory=bytearray)
    over: bool = False
    started: bool = False
    #: time.monotonic() when the start marker arrived (the probe's own clock starts).
    started_at: float | None = None

    def take(self, is_stdout: bool, data: bytes) -> None:
        if is_stdout and len(self.prefix) < self.skip:
            # The start marker is ours, not the probe's; it is not charged.
            cut = self.skip - len(self.prefix)
            self.prefix += data[:cut]
            data = data[cut:]
        room = self.budget - len(self.out) - len(self.err)
        target = self.out if is_stdout else self.err
        target += data[: max(room, 0)]
        if len(data) > room:
            self.over = True


@dataclass(frozen=True)
class Bounded:
    """What happened: ``ok``, ``timeout``, ``output_limit``, ``start_failed`` or ``start_timeout``.

    ``start_failed`` means the start hook refused to let the command go on
    (``start_detail`` says why); the command was killed before it ran.
    """

    status: str
    exit_code: int | None
    prefix: bytes
    stdout: bytes
    stderr: bytes
    elapsed_seconds: float
    start_detail: str = ""
    #: Spawn to start marker (the sandbox's own start-up); None without a marker.
    launch_seconds: float | None = None


#: Bound on the sandbox's own start-up (Node, bubblewrap, the gate), separate from the probe's.
STARTUP_TIMEOUT_SECONDS = 60.0


def _startup_detail(status: str, startup_seconds: float) -> str:
    if status == "start_timeout":
        return f"the sandbox did not start the probe within {startup_seconds:g} s"
    return ""


#: Called once the start marker has arrived; raises ``OSError`` to stop the run.
StartHook = Callable[[], None]


class _StartRefused(Exception):
    pass


def _check_start(drain: _Drain, on_start: StartHook | None, marker: bytes) -> None:
    if drain.started or len(drain.prefix) < drain.skip:
        return
    drain.started = True
    drain.started_at = time.monotonic()
    if on_start is not None and bytes(drain.prefix) == marker:
        try:
            on_start()
        except OSError as exc:
            raise _StartRefused(str(exc)) from exc


def _pump(
    proc: subprocess.Popen[bytes],
    drain: _Drain,
    limits: tuple[float, float],
    start: tuple[StartHook | None, bytes],
) -> str:
    """Drain until exit; the deadline is the start-up bound until the marker, then the timeout."""
    startup_seconds, timeout_seconds = limits
    launched = time.monotonic()

    def deadline() -> float:
        if drain.skip and drain.started_at is None:
            return launched + startup_seconds
        return (drain.started_at or launched) + timeout_seconds

    selector = selectors.DefaultSelector()
    if proc.stdout is None or proc.stderr is None:  # pragma: no cover - PIPE was given
        raise OSError("subprocess pipes were not created")
    selector.register(proc.stdout, selectors.EVENT_READ, True)
    selector.register(proc.stderr, selectors.EVENT_READ, False)
    with selector:
        while selector.get_map():
            remaining = deadline() - time.monotonic()
            if remaining <= 0:
                return (
                    "timeout" if drain.started_at is not None or not drain.skip else "start_timeout"
                )
            for key, _ in selector.select(min(remaining, 0.5)):
                data = os.read(key.fd, _CHUNK)
                if not data:
                    selector.unregister(key.fileobj)
                    continue
                drain.take(bool(key.data), data)
                _check_start(drain, *start)
                if drain.over:
                    return "output_limit"
    try:
        proc.wait(max(deadline() - time.monotonic(), 0))
    except subprocess.TimeoutExpired:
        return "timeout"
    return "ok"


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def _marked(marker: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if process.environ().get(MARKER_ENV) == marker:
                found.append(process)
    return found


def _terminate(proc: subprocess.Popen[bytes], cgroup: RunCgroup | None, marker: str) -> None:
    # Remember the tree before the leader dies and orphans are re-parented.
    tree = _descendants(proc.pid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(_GRACE_SECONDS)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    for process in tree + ([] if cgroup else _marked(marker)):
        with contextlib.suppress(psutil.Error):
            process.kill()
    if cgroup is not None:
        # The cgroup holds every process of the run, setsid'd or not.
        cgroup.kill_all()
    proc.wait()


def run_bounded(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    timeout_seconds: float,
    budget: int,
    skip_stdout_prefix: int = 0,
    cgroup: RunCgroup | None = None,
    start_marker: bytes = b"",
    on_start: StartHook | None = None,
    startup_seconds: float = STARTUP_TIMEOUT_SECONDS,
) -> Bounded:
    """Run ``argv`` to completion, timeout or budget; always sweep survivors. Raises ``OSError``.

    ``on_start`` runs once the first ``skip_stdout_prefix`` stdout bytes equal
    ``start_marker``; if it raises ``OSError`` the command is killed and the
    status is ``start_failed``. With a marker, ``timeout_seconds`` counts from
    the marker (the probe's own start); the sandbox's start-up has its own bound,
    ``startup_seconds``, and exceeding it is ``start_timeout``.
    """
    drain = _Drain(budget=budget, skip=skip_stdout_prefix)
    start_detail = ""
    started = time.monotonic()
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=dict(env),
        start_new_session=True,
        close_fds=True,
        preexec_fn=cgroup.join_current_process if cgroup else None,
    )
    try:
        limits = (startup_seconds, timeout_seconds)
        status = _pump(proc, drain, limits, (on_start, start_marker))
    except _StartRefused as exc:
        status, start_detail = "start_failed", str(exc)
    finally:
        _terminate(proc, cgroup, env.get(MARKER_ENV, ""))
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    return Bounded(
        status=status,
        exit_code=proc.returncode if status == "ok" else None,
        prefix=bytes(drain.prefix),
        stdout=bytes(drain.out),
        stderr=bytes(drain.err),
        elapsed_seconds=time.monotonic() - (drain.started_at or started),
        start_detail=start_detail or _startup_detail(status, startup_seconds),
        launch_seconds=None if drain.started_at is None else drain.started_at - started,
    )
