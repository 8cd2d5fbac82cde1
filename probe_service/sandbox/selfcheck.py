"""Prove, once per process, that the kernel enforces the limits we record.

docs/ARCHITECTURE.md, "Limits": a limit counts only if the kernel enforces it
while the probe runs. Before the first run of a worker or CLI process, each
mechanism is attacked on a small scale -- a process allocates past a memory
limit, a shell forks past a task limit, a writer overfills a tmpfs -- and
every attack must be stopped. If one is not, every run of this process ends
``inconclusive`` with reason ``limits_unverified``; nothing pretends.
"""

from __future__ import annotations

import errno
import functools
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from probe_service.errors import SandboxUnavailable
from probe_service.rundirs import sweep_stale_run_dirs
from probe_service.sandbox.guardcheck import check_guarded_launch, selfcheck_limits
from probe_service.sandbox.identity import PROBE_SLOTS, PROBE_UID_BASE
from probe_service.sandbox.limits import RunCgroup, create_run_cgroup, sweep_stale_cgroups
from probe_service.sandbox.runtime import SandboxRuntime, locate_runtime
from probe_service.sandbox.scratch import (
    ScratchLimits,
    scratch_filesystem,
    sweep_stale_scratch,
)

__all__ = ["describe_mechanism", "verify_limits"]

_MEMORY_LIMIT = 32 * 1024 * 1024
_TASK_LIMIT = 4
_ALLOCATE = "b = b'x' * (160 << 20)"
_FORKS = "for i in 1 2 3 4 5 6 7 8 9 10 11 12; do sleep 600 & done; exit 0"


def _run_in_probe_group(cgroup: RunCgroup, argv: list[str]) -> int:
    def join() -> None:
        cgroup.move_to_probe_group(os.getpid())

    # No pipes: the forked sleepers would hold them open long after the shell exits.
    done = subprocess.run(
        argv,
        env={"PATH": "/usr/bin:/bin"},  # nothing of the worker's environment
        preexec_fn=join,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=120,
        check=False,
    )
    return done.returncode


def _check_cgroups() -> None:
    cgroup = create_run_cgroup("selfcheck", selfcheck_limits(_MEMORY_LIMIT, _TASK_LIMIT))
    try:
        _run_in_probe_group(cgroup, [sys.executable, "-c", _ALLOCATE])
        if cgroup.memory_kills() == 0:
            raise SandboxUnavailable(
                f"limits: a process allocating 160 MiB under a {_MEMORY_LIMIT}-byte cgroup "
                "memory limit was not killed",
                reason="limits_unverified",
            )
        _run_in_probe_group(cgroup, ["/bin/sh", "-c", _FORKS])
        if cgroup.forks_refused() == 0:
            raise SandboxUnavailable(
                f"limits: 12 forks under a cgroup pids limit of {_TASK_LIMIT} all succeeded",
                reason="limits_unverified",
            )
    finally:
        cgroup.remove()


def _check_tmpfs() -> None:
    with tempfile.TemporaryDirectory(prefix="byte-probe-selfcheck-") as parent:
        target = Path(parent) / "scratch"
        target.mkdir()
        with scratch_filesystem(target, ScratchLimits(size_bytes=64 * 1024, inodes=32)):
            if _fills(lambda: _write_big(target)) and _fills(lambda: _make_dirs(target)):
                return
    raise SandboxUnavailable(
        "limits: a tmpfs with size= and nr_inodes= did not stop writes at its limits",
        reason="limits_unverified",
    )


def _write_big(target: Path) -> None:
    (target / "big").write_bytes(b"x" * (1 << 20))


def _make_dirs(target: Path) -> None:
    for index in range(64):
        (target / f"d{index}").mkdir()


def _fills(action: Callable[[], None]) -> bool:
    try:
        action()
    except OSError as exc:
        return exc.errno == errno.ENOSPC
    return False


_lock = threading.Lock()


@functools.cache
def _swept_and_attacked() -> str:
    # At a process's first run: first clear what dead workers left, then attack the limits.
    sweep_stale_cgroups()
    sweep_stale_scratch()
    sweep_stale_run_dirs()
    try:
        _check_cgroups()
        _check_tmpfs()
    except SandboxUnavailable as exc:
        return f"{exc.reason}\0{exc}"
    return ""


@functools.cache
def _guard_attacked(runtime: SandboxRuntime) -> str:
    try:
        check_guarded_launch(runtime)
    except SandboxUnavailable as exc:
        return f"{exc.reason}\0{exc}"
    return ""


def _verified(runtime: SandboxRuntime) -> str:
    # One check per process even when several worker threads start their first run at once.
    with _lock:
        return _swept_and_attacked() or _guard_attacked(runtime)


def verify_limits(runtime: SandboxRuntime | None = None) -> None:
    """Raise ``SandboxUnavailable`` unless this machine's kernel enforced every limit we use,
    including those of ``runtime``'s bubblewrap guard (the located runtime unless given)."""
    failure = _verified(runtime or locate_runtime())
    if failure:
        reason, _, message = failure.partition("\0")
        raise SandboxUnavailable(message, reason=reason)


def describe_mechanism() -> list[str]:
    """Return one line per containment mechanism in use here, and whether it was verified."""
    lines = [
        f"probe identity: uid {PROBE_UID_BASE}+slot ({PROBE_SLOTS} slots, no passwd entries), "
        "set by setpriv from a root worker; new user/ipc/uts/cgroup/net/mount/pid namespaces",
    ]
    try:
        user_ns = Path("/proc/sys/user/max_user_namespaces").read_text(encoding="ascii").strip()
    except OSError:
        user_ns = "unknown"
    lines.append(f"unprivileged user namespaces: max_user_namespaces={user_ns}")
    try:
        verify_limits()
        verdict = "verified by attack"
    except SandboxUnavailable as exc:
        verdict = f"NOT verified ({exc.reason}: {exc})"
    lines.append(
        "limits: cgroup v1 memory (with kernel TCP buffers) + pids on a gated probe group, "
        "RLIMIT_CPU, RLIMIT_NOFILE, tmpfs scratch (size, nr_inodes, also at /dev/shm), "
        "a seccomp filter denying native AIO and read-only mounts elsewhere (bubblewrap "
        f"guard): {verdict}"
    )
    return lines
