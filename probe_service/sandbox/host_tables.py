"""Host-wide tables one run could fill: open files and tasks, checked against the machine.

docs/ARCHITECTURE.md, "Limits" (kernel resources): the kernel bounds a run's open files by
``RLIMIT_NOFILE`` per process and its tasks by ``pids.max``, but the tables they live in
(``fs.file-max``, ``kernel.pid_max``, ``kernel.threads-max``) belong to the whole host.
A policy whose one run could hold more than half of any of them is refused on this
machine -- at ``policy check`` and again before each run -- so no single run can leave
the host and the other runs without descriptors or processes. The worker's own
``RLIMIT_NOFILE`` hard limit is checked too: the probe can only be given less.
"""

from __future__ import annotations

import resource
from pathlib import Path

from probe_service.policies.model import DEFAULT_MAX_OPEN_FILES, Policy
from probe_service.sandbox.limits import DEFAULT_MAX_PROCESSES

__all__ = ["HOST_TABLE_SHARE", "host_table_problem"]

#: The largest share of a host-wide table one run may be able to hold: one half.
HOST_TABLE_SHARE = 2
_PROC_SYS = Path("/proc/sys")


def _sysctl(name: str) -> int | None:
    try:
        return int((_PROC_SYS / name).read_text(encoding="ascii").split()[0])
    except (OSError, ValueError, IndexError):
        return None


def host_table_problem(policy: Policy, extra_tasks: int = 0) -> str | None:
    """Return why a run of ``policy`` could hold too much of a host-wide table on this
    machine (naming the sysctl and the numbers), or None. ``extra_tasks`` are the
    launcher's and relays' tasks beside the probe's (the run group's own budget)."""
    processes = policy.max_processes or DEFAULT_MAX_PROCESSES
    files = policy.max_open_files or DEFAULT_MAX_OPEN_FILES
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and files > hard:
        return (
            f"max_open_files {files} is above the worker's own RLIMIT_NOFILE hard limit "
            f"{hard}; raise the worker's limit or lower max_open_files"
        )
    wanted = {
        "fs/file-max": (processes * files, "max_processes x max_open_files"),
        "kernel/pid_max": (processes + extra_tasks, "the run's tasks"),
        "kernel/threads-max": (processes + extra_tasks, "the run's tasks"),
    }
    for name, (count, what) in wanted.items():
        size = _sysctl(name)
        if size is not None and count > size // HOST_TABLE_SHARE:
            sysctl = name.replace("/", ".")
            return (
                f"{what} = {count} is more than half of this machine's {sysctl} ({size}): "
                f"one run could leave the host without room; lower the policy's limits"
            )
    return None
