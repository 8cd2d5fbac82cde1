"""Run one argv with a wall-clock timeout and one shared stdout+stderr byte budget.

seed 000: "Stdout and stderr are drained concurrently into one bounded
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from probe_service.sandbox.limits import RunCgroup

__all__ = ["MARKER_ENV", "Bounded", "run_bounded"]

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
    """What happened: ``status`` is ``ok``, ``timeout`` or ``output_limit``."""

    status: str
    exit_code: int | None
    prefix: bytes
    stdout: bytes
    stderr: bytes
    elapsed_seconds: float


def _pump(proc: subprocess.Popen[bytes], drain: _Drain, deadline: float) -> str:
    selector = selectors.DefaultSelector()
    if proc.stdout is None or proc.stderr is None:  # pragma: no cover - PIPE was given
        raise OSError("subprocess pipes were not created")
    selector.register(proc.stdout, selectors.EVENT_READ, True)
    selector.register(proc.stderr, selectors.EVENT_READ, False)
    with selector:
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout"
            for key, _ in selector.select(min(remaining, 0.5)):
                data = os.read(key.fd, _CHUNK)
                if not data:
                    selector.unregister(key.fileobj)
                    continue
                drain.take(bool(key.data), data)
                if drain.over:
                    return "output_limit"
    try:
        proc.wait(max(deadline - time.monotonic(), 0))
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
) -> Bounded:
    """Run ``argv`` to completion, timeout or budget; always sweep survivors. Raises ``OSError``."""
    drain = _Drain(budget=budget, skip=skip_stdout_prefix)
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
        status = _pump(proc, drain, started + timeout_seconds)
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
        elapsed_seconds=time.monotonic() - started,
    )
