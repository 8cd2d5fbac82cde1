"""Limits the Sandbox Runtime does not enforce: memory, processes, CPU, file size.

The runtime (0.0.55) limits filesystem and network only. We add:

* a per-run cgroup v1 (``memory`` + ``pids`` controllers) when the machine offers
  writable ones -- it holds the whole run tree (node, bwrap, socat, the probe),
  so the limits carry a documented runtime overhead, and it lets the runner kill
  every survivor, including ``setsid`` double-forked daemons;
* otherwise rlimits on the probe alone (``prlimit --as --nproc``);
* always ``prlimit --cpu`` (CPU seconds) and, with ``scratch_bytes``, ``--fsize``;
* when the worker is root, ``setpriv`` drops every capability, because bwrap
  run by root leaves the probe fully capable.

RLIMIT_NPROC is never enforced for uid 0 (the kernel exempts the root user
whatever its capabilities), so a root worker without a usable cgroup refuses
a policy that sets ``max_processes`` rather than pretending to enforce it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from probe_service.policies.model import Policy
from probe_service.sandbox.results import LimitsApplied

__all__ = [
    "CGROUP_ROOT",
    "DEFAULT_MAX_PROCESSES",
    "DEFAULT_MEMORY_BYTES",
    "RUNTIME_MEMORY_OVERHEAD",
    "RUNTIME_TASK_OVERHEAD",
    "RunCgroup",
    "create_run_cgroup",
    "drop_privileges_argv",
    "plan_limits",
    "prlimit_argv",
]

CGROUP_ROOT = Path("/sys/fs/cgroup")
#: Applied when a policy sets no ``memory_bytes``.
DEFAULT_MEMORY_BYTES = 2 * 1024**3
#: Applied when a policy sets no ``max_processes``.
DEFAULT_MAX_PROCESSES = 256
#: Tasks (threads count) the runtime itself uses: node's threads, sh, bwrap,
#: two host socat bridges, two in-sandbox socat listeners, bash, apply-seccomp.
RUNTIME_TASK_OVERHEAD = 40
#: Memory the runtime itself uses (node + proxies), added to the cgroup limit.
RUNTIME_MEMORY_OVERHEAD = 256 * 1024 * 1024
_CONTROLLERS = ("memory", "pids")


def _own_cgroup(controller: str) -> Path | None:
    try:
        lines = Path("/proc/self/cgroup").read_text(encoding="ascii").splitlines()
    except OSError:
        return None
    for line in lines:
        _, names, path = line.split(":", 2)
        if controller in names.split(","):
            return CGROUP_ROOT / controller / path.lstrip("/")
    return None


@dataclass(frozen=True)
class RunCgroup:
    """One run's cgroup v1 directories (one per controller)."""

    directories: tuple[Path, ...]

    def join_current_process(self) -> None:
        """Move the calling process into every directory (used as ``preexec_fn``)."""
        for directory in self.directories:
            (directory / "cgroup.procs").write_text(str(os.getpid()), encoding="ascii")

    def pids(self) -> set[int]:
        """Return every process still in the run's cgroups."""
        found: set[int] = set()
        for directory in self.directories:
            with contextlib.suppress(OSError):
                text = (directory / "cgroup.procs").read_text(encoding="ascii")
                found.update(int(pid) for pid in text.split())
        return found

    def kill_all(self, deadline_seconds: float = 5.0) -> bool:
        """SIGKILL every member until none is left; return True if the cgroup emptied."""
        stop = time.monotonic() + deadline_seconds
        while (members := self.pids()) and time.monotonic() < stop:
            for pid in members:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)
        return not self.pids()

    def remove(self) -> None:
        """Kill what is left and remove the directories (best effort)."""
        self.kill_all()
        for directory in self.directories:
            for _ in range(50):
                try:
                    directory.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


def create_run_cgroup(run_id: str, memory_bytes: int, tasks: int) -> RunCgroup | None:
    """Create a cgroup v1 per controller under our own; None if the machine offers none."""
    created: list[Path] = []
    try:
        for controller in _CONTROLLERS:
            parent = _own_cgroup(controller)
            if parent is None or not (parent / "cgroup.procs").exists():
                raise OSError(f"no cgroup v1 {controller} hierarchy")
            directory = parent / f"byte-probe-{run_id}"
            directory.mkdir()
            created.append(directory)
        memory_dir, pids_dir = created
        (memory_dir / "memory.limit_in_bytes").write_text(str(memory_bytes), encoding="ascii")
        with contextlib.suppress(OSError):  # swap accounting may be disabled
            (memory_dir / "memory.memsw.limit_in_bytes").write_text(
                str(memory_bytes), encoding="ascii"
            )
        (pids_dir / "pids.max").write_text(str(tasks), encoding="ascii")
    except OSError:
        RunCgroup(tuple(created)).remove()
        return None
    return RunCgroup(tuple(created))


def plan_limits(policy: Policy, mechanism: str) -> LimitsApplied:
    """Return the limits a run of ``policy`` gets under ``mechanism``."""
    tasks: int | None = policy.max_processes or DEFAULT_MAX_PROCESSES
    if mechanism == "rlimit" and os.geteuid() == 0:
        tasks = None  # not enforceable for uid 0; see the module docstring
    return LimitsApplied(
        mechanism=mechanism,
        timeout_seconds=policy.timeout_seconds,
        max_output_bytes=policy.max_output_bytes,
        cpu_seconds=policy.timeout_seconds + 1,
        memory_bytes=policy.memory_bytes or DEFAULT_MEMORY_BYTES,
        max_processes=tasks,
        scratch_bytes=policy.scratch_bytes,
        file_size_bytes=policy.scratch_bytes,
    )


def drop_privileges_argv(setpriv: Path) -> list[str]:
    """Return the ``setpriv`` prefix that strips every capability from a root worker's probe.

    bwrap run by real root keeps every capability (CapEff full, init user
    namespace), so without this a probe could mknod/mount its way out. The uid
    stays 0: bwrap 0.8 creates the parents of bind mounts with mode 0700, so a
    non-root uid could not reach the snapshot or scratch by absolute path.
    """
    return [
        str(setpriv),
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
        "--",
    ]


def prlimit_argv(prlimit: Path, limits: LimitsApplied) -> list[str]:
    """Return the ``prlimit`` prefix applied to the probe inside the sandbox."""
    argv = [str(prlimit), f"--cpu={limits.cpu_seconds}"]
    if limits.file_size_bytes is not None:
        argv.append(f"--fsize={limits.file_size_bytes}")
    if limits.mechanism == "rlimit":
        # No cgroup: the probe's own rlimits are the only memory/process bound.
        argv.append(f"--as={limits.memory_bytes}")
        if limits.max_processes is not None:
            argv.append(f"--nproc={limits.max_processes}")
    return [*argv, "--"]
