"""Limits the Sandbox Runtime does not enforce: memory, processes, CPU, files, scratch.

docs/ARCHITECTURE.md, "Limits". The runtime (0.0.55) limits filesystem and
network only. Each run gets a cgroup v1 pair per controller (``memory``,
``pids``):

* the *run* group holds the launcher (Node, bubblewrap, the sandbox's outer shell)
  and bounds it generously, so the runner can kill every survivor;
* the *probe* group, a child of it, holds only the probe: the in-sandbox shell
  waits at a gate until the runner has moved it there, then ``exec``s the
  probe. The policy's own numbers are the probe group's limits, so the number
  a receipt records is the number the kernel enforced. Its kernel TCP buffers
  are charged there too (``memory.kmem.tcp.limit_in_bytes``; cgroup v1 leaves
  them uncharged otherwise);
* the *relay* group (``pids`` only), the probe group's sibling, holds the
  runtime's socat relays, which fork once per proxied connection: their own
  stated budget, never the probe's or the launcher's.

CPU time and open files are ``RLIMIT_CPU`` and ``RLIMIT_NOFILE`` per process
(``prlimit`` inside the sandbox), and scratch is a tmpfs with a byte and inode
limit (``scratch.py``). There is no weaker fallback: a machine without writable
cgroup v1 ``memory`` and ``pids`` hierarchies refuses runs
(``limits_unenforceable``) rather than pretend.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from probe_service.errors import SandboxUnavailable
from probe_service.policies.model import DEFAULT_MAX_OPEN_FILES, Policy
from probe_service.sandbox.results import LimitsApplied
from probe_service.sandbox.scratch import (
    DEFAULT_SCRATCH_BYTES,
    DEFAULT_SCRATCH_INODES,
    ScratchLimits,
)
from probe_service.sandbox.seccomp import DENIED_SYSCALLS

__all__ = [
    "CGROUP_ROOT",
    "DEFAULT_MAX_PROCESSES",
    "DEFAULT_MEMORY_BYTES",
    "LAUNCHER_MEMORY_BYTES",
    "LAUNCHER_TASKS",
    "RELAY_TASKS",
    "CounterBaseline",
    "RunCgroup",
    "create_run_cgroup",
    "plan_limits",
    "prlimit_argv",
    "scratch_limits",
    "set_run_limits",
    "sweep_stale_cgroups",
]

CGROUP_ROOT = Path("/sys/fs/cgroup")
#: Applied when a policy sets no ``memory_bytes``.
DEFAULT_MEMORY_BYTES = 2 * 1024**3
#: Applied when a policy sets no ``max_processes``.
DEFAULT_MAX_PROCESSES = 256
#: What the launcher around the probe may use on top of the probe's own limits:
#: Node's threads, bwrap, apply-seccomp and the gate shell.
LAUNCHER_TASKS = 64
#: The runtime's socat relays (the sandbox's listeners and, on the CLI path, the host's
#: bridges), which fork once per proxied connection: about 60 connections at once.
RELAY_TASKS = 128
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
class CounterBaseline:
    """The kill and refusal counters of a run's groups when the run was given them.

    cgroup v1 cannot reset ``oom_kill`` or ``pids.events``, so a slot's kept groups
    (docs/ARCHITECTURE.md, "Limits") are read as the rise above these: each run's own.
    """

    memory_kills: int = 0
    forks_refused: int = 0
    relay_forks_refused: int = 0


@dataclass(frozen=True)
class RunCgroup:
    """One run's cgroup v1 directories: the run group and its probe child, per controller;
    ``baseline`` holds the counters as the run found them."""

    memory_dir: Path
    pids_dir: Path
    baseline: CounterBaseline = field(default_factory=CounterBaseline)

    @property
    def probe_dirs(self) -> tuple[Path, Path]:
        """The probe group's ``memory`` and ``pids`` directories."""
        return self.memory_dir / "probe", self.pids_dir / "probe"

    @property
    def relay_dir(self) -> Path:
        """The relay group's ``pids`` directory."""
        return self.pids_dir / "relay"

    @property
    def directories(self) -> tuple[Path, ...]:
        """Every directory, children first (the order they must be removed in)."""
        return (*self.probe_dirs, self.relay_dir, self.memory_dir, self.pids_dir)

    def join_current_process(self) -> None:
        """Move the calling process into the run group (used as ``preexec_fn``)."""
        for directory in (self.memory_dir, self.pids_dir):
            _write(directory / "cgroup.procs", str(os.getpid()))

    def move_to_probe_group(self, pid: int) -> None:
        """Move ``pid`` (the gated shell, before it execs the probe) into the probe group."""
        for directory in self.probe_dirs:
            _write(directory / "cgroup.procs", str(pid))

    def move_to_relay_group(self, pids: set[int]) -> None:
        """Move ``pids`` (the runtime's relays) into the relay group; a process that is gone
        is skipped."""
        for pid in sorted(pids):
            with contextlib.suppress(ProcessLookupError):
                _write(self.relay_dir / "cgroup.procs", str(pid))

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

    def counters(self) -> CounterBaseline:
        """The kill and refusal counters as the kernel reports them now (not deltas)."""
        memory_dir, pids_dir = self.probe_dirs
        return CounterBaseline(
            memory_kills=_counter(memory_dir / "memory.oom_control", "oom_kill"),
            forks_refused=_counter(pids_dir / "pids.events", "max"),
            relay_forks_refused=_counter(self.relay_dir / "pids.events", "max"),
        )

    def memory_kills(self) -> int:
        """How many probe processes the kernel killed at the memory limit in this run."""
        now = _counter(self.probe_dirs[0] / "memory.oom_control", "oom_kill")
        return now - self.baseline.memory_kills

    def reset_memory_peak(self) -> None:
        """Start the probe group's memory high-water mark afresh (cgroup v1 takes a write of
        0), so the peak a receipt reports is the probe's own, not a preflight command's."""
        with contextlib.suppress(OSError):
            _write(self.probe_dirs[0] / "memory.max_usage_in_bytes", "0")

    def memory_peak_bytes(self) -> int | None:
        """The probe group's memory high-water mark (the kernel's ``max_usage_in_bytes``:
        page cache and tmpfs pages it charged included), or None when unreadable."""
        try:
            text = (self.probe_dirs[0] / "memory.max_usage_in_bytes").read_text("ascii")
            return int(text)
        except (OSError, ValueError):
            return None

    def forks_refused(self) -> int:
        """How many forks of the probe the kernel refused at the task limit in this run."""
        return _counter(self.probe_dirs[1] / "pids.events", "max") - self.baseline.forks_refused

    def tcp_limit_reached(self) -> bool:
        """Whether the probe's kernel TCP buffers reached their limit (the kernel then refuses
        more, yet admits one segment per connection past it so each can progress)."""
        memory_dir = self.probe_dirs[0]
        try:
            peak = int((memory_dir / "memory.kmem.tcp.max_usage_in_bytes").read_text("ascii"))
            limit = int((memory_dir / "memory.kmem.tcp.limit_in_bytes").read_text("ascii"))
        except (OSError, ValueError):
            return False
        return peak >= limit

    def relay_forks_refused(self) -> int:
        """How many forks of the runtime's relays the kernel refused at their budget in this
        run."""
        refused = _counter(self.relay_dir / "pids.events", "max")
        return refused - self.baseline.relay_forks_refused

    def limit_hit(self) -> str | None:
        """Return the limit the kernel had to enforce (``memory``, ``tcp``, ``processes`` or
        ``relays``), if any."""
        if self.memory_kills() > 0:
            return "memory"
        if self.tcp_limit_reached():
            return "tcp"
        if self.forks_refused() > 0:
            return "processes"
        if self.relay_forks_refused() > 0:
            return "relays"
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


def _make_groups(name: str, created: list[Path]) -> RunCgroup:
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
    group.relay_dir.mkdir()
    created.append(group.relay_dir)
    return group


def _write_checked(path: Path, value: int) -> None:
    """Write a limit and read it back (memory limits round down to a page); raises OSError."""
    _write(path, str(value))
    if path.name == "pids.max":
        wanted = value
    else:
        page = os.sysconf("SC_PAGE_SIZE")
        wanted = value // page * page
    if int(path.read_text(encoding="ascii")) != wanted:
        raise OSError(f"{path.name} did not take the run's limit {value}")


def set_run_limits(group: RunCgroup, limits: LimitsApplied) -> None:
    """Write the run's limits into ``group`` (new, or a slot's kept one holding an earlier
    run's limits) and read each back; raises ``OSError``."""
    memory_dir, pids_dir = group.probe_dirs
    memory = limits.memory_bytes or DEFAULT_MEMORY_BYTES
    tasks = limits.max_processes or DEFAULT_MAX_PROCESSES
    relays = limits.relay_tasks or RELAY_TASKS
    _write_checked(group.memory_dir / "memory.limit_in_bytes", memory + LAUNCHER_MEMORY_BYTES)
    _write_checked(group.pids_dir / "pids.max", tasks + LAUNCHER_TASKS + relays)
    # The kernel keeps memory.limit <= memsw.limit: open memsw first, so a kept group's
    # earlier, smaller limit cannot refuse a larger one.
    memsw = memory_dir / "memory.memsw.limit_in_bytes"
    with contextlib.suppress(OSError):  # swap accounting may be disabled
        _write(memsw, "-1")
    _write_checked(memory_dir / "memory.limit_in_bytes", memory)
    if memsw.exists():
        _write_checked(memsw, memory)
    # cgroup v1 charges socket buffers to a group only once this is set; the kernel counts
    # them apart from memory.usage_in_bytes. (memory.kmem.limit_in_bytes is never written:
    # this kernel accepts and ignores it.)
    tcp = limits.tcp_buffer_bytes or memory
    _write(memory_dir / "memory.kmem.tcp.limit_in_bytes", str(tcp))
    if int((memory_dir / "memory.kmem.tcp.limit_in_bytes").read_text(encoding="ascii")) > tcp:
        raise OSError("memory.kmem.tcp.limit_in_bytes did not take the run's limit")
    _write_checked(pids_dir / "pids.max", tasks)
    _write_checked(group.relay_dir / "pids.max", relays)


def create_run_cgroup(name: str, limits: LimitsApplied) -> RunCgroup:
    """Create the run's cgroups with the probe's limits; raises ``SandboxUnavailable``."""
    created: list[Path] = []
    try:
        group = _make_groups(name, created)
        set_run_limits(group, limits)
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
    memory = policy.memory_bytes or DEFAULT_MEMORY_BYTES
    return LimitsApplied(
        mechanism="cgroup_v1+tmpfs+seccomp",
        timeout_seconds=policy.timeout_seconds,
        max_output_bytes=policy.max_output_bytes,
        cpu_seconds=policy.timeout_seconds + 1,
        memory_bytes=memory,
        max_processes=policy.max_processes or DEFAULT_MAX_PROCESSES,
        scratch_bytes=scratch.size_bytes,
        scratch_inodes=scratch.inodes,
        file_size_bytes=None,
        max_open_files=policy.max_open_files or DEFAULT_MAX_OPEN_FILES,
        tcp_buffer_bytes=memory,
        relay_tasks=RELAY_TASKS,
        enforced_by={
            "timeout_seconds": "runner wall clock, process group and cgroup kill",
            "max_output_bytes": "runner pipe budget",
            "cpu_seconds": "RLIMIT_CPU per process",
            "memory_bytes": "cgroup v1 memory.limit_in_bytes on the probe group",
            "max_processes": "cgroup v1 pids.max on the probe group",
            "scratch_bytes": "tmpfs size (scratch, also mounted at /dev/shm)",
            "scratch_inodes": "tmpfs nr_inodes (scratch, also mounted at /dev/shm)",
            "max_open_files": "RLIMIT_NOFILE per process",
            "tcp_buffer_bytes": "cgroup v1 memory.kmem.tcp.limit_in_bytes on the probe group",
            "relay_tasks": "cgroup v1 pids.max on the run's relay group",
            "denied_syscalls": (
                f"seccomp filter returning ENOSYS (bubblewrap --add-seccomp-fd): "
                f"{', '.join(DENIED_SYSCALLS)}"
            ),
            "writes_outside_scratch": (
                "none: every runtime tmpfs and /dev remounted read-only by bubblewrap"
            ),
            "pseudo_terminals": "none: /dev/pts is an empty read-only tmpfs",
        },
    )


def prlimit_argv(prlimit: Path, limits: LimitsApplied) -> list[str]:
    """Return the ``prlimit`` prefix applied to the probe inside the sandbox."""
    files = limits.max_open_files or DEFAULT_MAX_OPEN_FILES
    return [str(prlimit), f"--cpu={limits.cpu_seconds}", "--core=0", f"--nofile={files}", "--"]
