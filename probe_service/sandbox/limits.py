"""Limits the Sandbox Runtime does not enforce: memory, processes, CPU, scratch.

docs/ARCHITECTURE.md, "Limits". The runtime (0.0.55) limits filesystem and
network only. Each run gets a cgroup v1 pair per controller (``memory``,
``pids``):

* the *run* group holds the launcher (Node, bubblewrap, socat bridges) and
  bounds it generously, so the runner can kill every survivor;
* the *probe* group, a child of it, holds only the probe: the in-sandbox shell
  waits at a gate until the runner has moved it there, then ``exec``s the
  probe. The policy's own numbers are the probe group's limits, so the number
  a receipt records is the number the kernel enforced.

CPU time is ``RLIMIT_CPU`` per process (``prlimit`` inside the sandbox), and
scratch is a tmpfs with a byte and inode limit (``scratch.py``). There is no
weaker fallback: a machine without writable cgroup v1 ``memory`` and ``pids``
hierarchies refuses runs (``limits_unenforceable``) rather than pretend.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from probe_service.errors import SandboxUnavailable
from probe_service.policies.model import Policy
from probe_service.sandbox.results import LimitsApplied
from probe_service.sandbox.scratch import (
    DEFAULT_SCRATCH_BYTES,
    DEFAULT_SCRATCH_INODES,
    ScratchLimits,
)

__all__ = [
    "CGROUP_ROOT",
    "DEFAULT_MAX_PROCESSES",
    "DEFAULT_MEMORY_BYTES",
    "LAUNCHER_MEMORY_BYTES",
    "LAUNCHER_TASKS",
    "RunCgroup",
    "create_run_cgroup",
    "plan_limits",
    "prlimit_argv",
    "scratch_limits",
    "sweep_stale_cgroups",
]

CGROUP_ROOT = Path("/sys/fs/cgroup")
#: Applied when a policy sets no ``memory_bytes``.
DEFAULT_MEMORY_BYTES = 2 * 1024**3
#: Applied when a policy sets no ``max_processes``.
DEFAULT_MAX_PROCESSES = 256
#: What the launcher around the probe may use on top of the probe's own limits:
#: Node's threads, bwrap, the socat bridges, apply-seccomp and the gate shell.
LAUNCHER_TASKS = 64
LAUNCHER_MEMORY_BYTES = 512 * 1024 * 1024
_CONTROLLERS = ("memory", "pids")
_PREFIX = "byte-probe-"


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


def _write(path: Path, value: str) -> None:
    path.write_text(value, encoding="ascii")


def _counter(path: Path, name: str) -> int:
    """Return the ``name N`` counter of a cgroup key/value file (0 when absent)."""
    with contextlib.suppress(OSError, ValueError):
        for line in path.read_text(encoding="ascii").splitlines():
            key, _, value = line.partition(" ")
            if key == name:
                return int(value)
    return 0


@dataclass(frozen=True)
class RunCgroup:
    """One run's cgroup v1 directories: the run group and its probe child, per controller."""

    memory_dir: Path
    pids_dir: Path

    @property
    def probe_dirs(self) -> tuple[Path, Path]:
        """The probe group's ``memory`` and ``pids`` directories."""
        return self.memory_dir / "probe", self.pids_dir / "probe"

    @property
    def directories(self) -> tuple[Path, ...]:
        """Every directory, children first (the order they must be removed in)."""
        return (*self.probe_dirs, self.memory_dir, self.pids_dir)

    def join_current_process(self) -> None:
        """Move the calling process into the run group (used as ``preexec_fn``)."""
        for directory in (self.memory_dir, self.pids_dir):
            _write(directory / "cgroup.procs", str(os.getpid()))

    def move_to_probe_group(self, pid: int) -> None:
        """Move ``pid`` (the gated shell, before it execs the probe) into the probe group."""
        for directory in self.probe_dirs:
            _write(directory / "cgroup.procs", str(pid))

    def pids_in_run(self) -> set[int]:
        """Return the processes of the run group itself (the launcher, not the probe)."""
        return self._members((self.memory_dir, self.pids_dir))

    def pids(self) -> set[int]:
        """Return every process still in the run's cgroups."""
        return self._members(self.directories)

    @staticmethod
    def _members(directories: tuple[Path, ...]) -> set[int]:
        found: set[int] = set()
        for directory in directories:
            with contextlib.suppress(OSError):
                text = (directory / "cgroup.procs").read_text(encoding="ascii")
                found.update(int(pid) for pid in text.split())
        return found

    def memory_kills(self) -> int:
        """How many probe processes the kernel killed at the memory limit."""
        return _counter(self.probe_dirs[0] / "memory.oom_control", "oom_kill")

    def forks_refused(self) -> int:
        """How many forks of the probe the kernel refused at the task limit."""
        return _counter(self.probe_dirs[1] / "pids.events", "max")

    def limit_hit(self) -> str | None:
        """Return the probe limit the kernel had to enforce (``memory``/``processes``), if any."""
        if self.memory_kills() > 0:
            return "memory"
        if self.forks_refused() > 0:
            return "processes"
        return None

    def kill_all(self, deadline_seconds: float = 5.0) -> bool:
        """SIGKILL every member until none is left; return True if the cgroups emptied."""
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


def _run_group_name(name: str) -> str:
    # The creator's pid lets a later worker sweep the groups of a dead one.
    return f"{_PREFIX}{os.getpid()}-{name}"


def sweep_stale_cgroups() -> int:
    """Kill and remove the run groups of worker processes that are gone; return how many."""
    swept = 0
    for controller in _CONTROLLERS:
        parent = _own_cgroup(controller)
        if parent is None or not parent.is_dir():
            continue
        for entry in parent.iterdir():
            pid = entry.name[len(_PREFIX) :].split("-", 1)[0]
            if not entry.name.startswith(_PREFIX) or not pid.isdigit():
                continue
            if Path(f"/proc/{pid}").exists():
                continue
            group = RunCgroup(memory_dir=entry, pids_dir=entry)
            group.remove()
            swept += 1
    return swept


def create_run_cgroup(name: str, limits: LimitsApplied) -> RunCgroup:
    """Create the run's cgroups with the probe's limits; raises ``SandboxUnavailable``."""
    created: list[Path] = []
    try:
        parents = []
        for controller in _CONTROLLERS:
            parent = _own_cgroup(controller)
            if parent is None or not (parent / "cgroup.procs").exists():
                raise OSError(f"no cgroup v1 {controller} hierarchy")
            parents.append(parent)
        for parent in parents:
            directory = parent / _run_group_name(name)
            directory.mkdir()
            created.append(directory)
            (directory / "probe").mkdir()
            created.append(directory / "probe")
        group = RunCgroup(memory_dir=created[0], pids_dir=created[2])
        memory_dir, pids_dir = group.probe_dirs
        memory = limits.memory_bytes or DEFAULT_MEMORY_BYTES
        tasks = limits.max_processes or DEFAULT_MAX_PROCESSES
        _write(group.memory_dir / "memory.limit_in_bytes", str(memory + LAUNCHER_MEMORY_BYTES))
        _write(group.pids_dir / "pids.max", str(tasks + LAUNCHER_TASKS))
        _write(memory_dir / "memory.limit_in_bytes", str(memory))
        with contextlib.suppress(OSError):  # swap accounting may be disabled
            _write(memory_dir / "memory.memsw.limit_in_bytes", str(memory))
        _write(pids_dir / "pids.max", str(tasks))
    except OSError as exc:
        for directory in reversed(created):
            with contextlib.suppress(OSError):
                directory.rmdir()
        raise SandboxUnavailable(
            f"limits: cannot create the run's cgroup v1 memory and pids groups ({exc})",
            reason="limits_unenforceable",
        ) from exc
    return group


def scratch_limits(policy: Policy) -> ScratchLimits:
    """Return the byte and inode limits of a run's scratch filesystem."""
    size = DEFAULT_SCRATCH_BYTES if policy.scratch_bytes is None else policy.scratch_bytes
    inodes = getattr(policy, "scratch_inodes", None) or DEFAULT_SCRATCH_INODES
    return ScratchLimits(size_bytes=size, inodes=inodes)


def plan_limits(policy: Policy) -> LimitsApplied:
    """Return the limits a run of ``policy`` gets, and what enforces each."""
    scratch = scratch_limits(policy)
    return LimitsApplied(
        mechanism="cgroup_v1+tmpfs",
        timeout_seconds=policy.timeout_seconds,
        max_output_bytes=policy.max_output_bytes,
        cpu_seconds=policy.timeout_seconds + 1,
        memory_bytes=policy.memory_bytes or DEFAULT_MEMORY_BYTES,
        max_processes=policy.max_processes or DEFAULT_MAX_PROCESSES,
        scratch_bytes=scratch.size_bytes,
        scratch_inodes=scratch.inodes,
        file_size_bytes=None,
        enforced_by={
            "timeout_seconds": "runner wall clock, process group and cgroup kill",
            "max_output_bytes": "runner pipe budget",
            "cpu_seconds": "RLIMIT_CPU per process",
            "memory_bytes": "cgroup v1 memory.limit_in_bytes on the probe group",
            "max_processes": "cgroup v1 pids.max on the probe group",
            "scratch_bytes": "tmpfs size",
            "scratch_inodes": "tmpfs nr_inodes",
        },
    )


def prlimit_argv(prlimit: Path, limits: LimitsApplied) -> list[str]:
    """Return the ``prlimit`` prefix applied to the probe inside the sandbox."""
    return [str(prlimit), f"--cpu={limits.cpu_seconds}", "--core=0", "--"]
