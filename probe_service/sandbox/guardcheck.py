"""The start-up attack on the kernel-resource limits: one bubblewrap launch through our guard.

docs/ARCHITECTURE.md, "Limits": a limit counts only if the kernel enforces it. Once per
process (``selfcheck.py`` caches it), the worker launches the real bubblewrap through the
real ``sandbox/bwrap-guard.sh`` -- the runtime's ``bwrapPath`` -- in a cgroup pair like a
run's, under ``prlimit`` like a probe, and the sandboxed process attacks each limit the
guard and the cgroup add: native AIO must answer ``ENOSYS`` (the seccomp filter), ``/tmp``
and ``/dev`` must refuse a file while ``/dev/shm`` lands in the given scratch directory
(the mounts), no pseudo-terminal may open, opening files must stop with ``EMFILE`` at
``RLIMIT_NOFILE``, and kernel TCP buffers pinned on loopback must be refused at the
group's ``memory.kmem.tcp.limit_in_bytes``. Any of them not stopped refuses every run of
this process (``limits_unverified``).
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from probe_service.errors import SandboxUnavailable
from probe_service.sandbox.limits import RunCgroup, create_run_cgroup
from probe_service.sandbox.results import LimitsApplied
from probe_service.sandbox.runtime import SandboxRuntime, find_system_tool
from probe_service.sandbox.seccomp import DENIED_ERRNO, native_number, write_filter

__all__ = ["check_guarded_launch", "selfcheck_limits"]

_FILES = 16
_TCP_LIMIT = 1 << 20
#: What the kernel admits per connection past a group's TCP limit (one loopback segment).
_SEGMENT_ALLOWANCE = 64 << 10
#: The attack, as the sandboxed process; argv: io_setup's number, the TCP cap. One JSON line.
_ATTACK = r"""
import ctypes, errno, json, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
report = {}
ctx = ctypes.c_ulong(0)
report["aio"] = ctypes.get_errno() if libc.syscall(int(sys.argv[1]), 1, ctypes.byref(ctx)) else 0
for name, path in (("tmp", "/tmp/x"), ("dev", "/dev/x"), ("shm", "/dev/shm/selfcheck")):
    try:
        open(path, "w").close()
        report[name] = 0
    except OSError as exc:
        report[name] = exc.errno
try:
    os.openpty()
    report["pty"] = 0
except OSError as exc:
    report["pty"] = exc.errno
held = []
try:
    while len(held) < 64:
        held.append(os.open("/dev/null", os.O_RDONLY))
    report["files"] = [len(held), 0]
except OSError as exc:
    report["files"] = [len(held), exc.errno]
for fd in held:
    os.close(fd)
cap, pinned, keep = int(sys.argv[2]), 0, []
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(4)
for _ in range(4):
    client = socket.create_connection(listener.getsockname())
    keep += [client, listener.accept()[0]]
    client.setblocking(False)
    try:
        while pinned < cap:
            pinned += client.send(b"x" * 65536)
    except OSError:
        pass
report["tcp"] = pinned
print(json.dumps(report), flush=True)
"""


def selfcheck_limits(
    memory_bytes: int, max_processes: int, tcp_buffer_bytes: int | None = None
) -> LimitsApplied:
    """The limits a self-check's probe runs under: a minute of CPU, no output budget."""
    return LimitsApplied(
        mechanism="selfcheck",
        timeout_seconds=60,
        max_output_bytes=0,
        cpu_seconds=60,
        memory_bytes=memory_bytes,
        max_processes=max_processes,
        scratch_bytes=None,
        file_size_bytes=None,
        tcp_buffer_bytes=tcp_buffer_bytes,
    )


def _tool(name: str) -> str:
    found = find_system_tool(name)
    if found is None:
        raise SandboxUnavailable(f"limits: {name} not in fixed system directories")
    return str(found)


def _interpreter() -> tuple[str, list[str]]:
    """The real path of this interpreter, and a read-only bind of its installation when it
    lies under ``/tmp`` (a checkout there: the launch's own ``/tmp`` would hide it)."""
    python = os.path.realpath(sys.executable)
    prefix = os.path.realpath(sys.base_prefix)
    under_tmp = [p for p in (python, prefix) if p == "/tmp" or p.startswith("/tmp/")]  # noqa: S108
    binds = [arg for p in under_tmp for arg in ("--ro-bind", p, p)]
    return python, binds


def _launch(runtime: SandboxRuntime, cgroup: RunCgroup, work: Path) -> dict[str, Any]:
    if runtime.bwrap_guard_path is None:
        raise SandboxUnavailable("limits: no bubblewrap guard on this platform")
    write_filter(work / "filter.bpf")
    (work / "shm").mkdir()
    python, interpreter = _interpreter()
    argv = [
        str(runtime.bwrap_guard_path),
        *("--new-session", "--die-with-parent", "--unshare-net", "--ro-bind", "/", "/"),
        # /tmp here is the sandbox's own (a tmpfs the guard must make read-only); an
        # interpreter installed below it is bound back read-only on top.
        *("--tmpfs", "/tmp", *interpreter, "--dev", "/dev", "--unshare-pid"),  # noqa: S108
        *("--proc", "/proc", "--"),
        *(_tool("prlimit"), f"--nofile={_FILES}", "--", python, "-I", "-c", _ATTACK),
        *(str(native_number("io_setup")), str(16 * _TCP_LIMIT)),
    ]
    env = {
        "PATH": "/usr/bin:/bin",
        "BYTE_PROBE_SECCOMP_FILTER": str(work / "filter.bpf"),
        "BYTE_PROBE_SHM_DIR": str(work / "shm"),
    }

    def join() -> None:
        cgroup.move_to_probe_group(os.getpid())

    done = subprocess.run(
        argv, env=env, preexec_fn=join, capture_output=True, timeout=120, check=False
    )
    try:
        report: dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    except (ValueError, IndexError) as exc:
        tail = done.stderr.decode(errors="replace")[-300:]
        raise SandboxUnavailable(
            f"limits: the guarded self-check launch reported nothing (exit {done.returncode}: "
            f"{tail!r})",
            reason="limits_unverified",
        ) from exc
    report["shm_landed"] = (work / "shm" / "selfcheck").is_file()
    return report


def _failures(report: dict[str, Any]) -> list[str]:
    failures = []
    if report.get("aio") != DENIED_ERRNO:
        failures.append(f"io_setup was not refused with ENOSYS ({report.get('aio')})")
    for name in ("tmp", "dev"):
        if report.get(name) != errno.EROFS:
            failures.append(f"/{name} was not refused read-only ({report.get(name)})")
    if report.get("shm") != 0 or not report.get("shm_landed"):
        failures.append("a file in /dev/shm did not land in scratch")
    if report.get("pty") == 0:
        failures.append("a pseudo-terminal opened")
    held, err = report.get("files", [None, None])
    if err != errno.EMFILE or held is None or held >= _FILES:
        failures.append(f"opening files did not stop with EMFILE under {_FILES} ({held}, {err})")
    # Unlimited, four connections pin far more than the cap (16 x the limit) allows; at the
    # limit the kernel still admits one segment per connection past it (<= 64 KiB each).
    pinned = int(report.get("tcp", 0))
    if pinned > _TCP_LIMIT + 4 * _SEGMENT_ALLOWANCE:
        failures.append(
            f"{pinned} bytes of TCP buffers were pinned under a {_TCP_LIMIT}-byte "
            "memory.kmem.tcp.limit_in_bytes"
        )
    return failures


def check_guarded_launch(runtime: SandboxRuntime) -> None:
    """Attack the guard's and the cgroup's kernel-resource limits in one real bubblewrap
    launch; raises ``SandboxUnavailable`` (``limits_unverified``) naming each that did not
    hold."""
    cgroup = create_run_cgroup("selfcheck-guard", selfcheck_limits(256 << 20, 32, _TCP_LIMIT))
    try:
        with tempfile.TemporaryDirectory(prefix="byte-probe-guardcheck-") as work:
            report = _launch(runtime, cgroup, Path(work))
        failures = _failures(report)
    finally:
        cgroup.remove()
    if failures:
        raise SandboxUnavailable(
            "limits: the bubblewrap guard's self-check attack was not stopped: "
            + "; ".join(failures),
            reason="limits_unverified",
        )
