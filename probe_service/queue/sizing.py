"""How big a worker process is by default: its launch lanes, threads and prefetch.

docs/ARCHITECTURE.md, "Pipelined worker": a process launches at most one probe per usable
core at a time (its lanes), and runs ``THREADS_PER_LANE`` threads per lane, so that while
one run of a lane is in the sandbox the next is taken, prepared and materialized, and the
one before it judged and finished. dramatiq prefetches one message per thread: every
thread has its next run at hand, and no process hoards more than it is working on.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

from ..errors import InvalidInput

__all__ = ["THREADS_PER_LANE", "WorkerSize", "usable_cores", "worker_size"]

#: Threads per launch lane: one in the sandbox, one preparing or finishing beside it.
THREADS_PER_LANE = 2


def usable_cores() -> tuple[int, int]:
    """``(usable, online)``: the cores this process may run on (its CPU affinity, where the
    platform tells it) and the cores the machine has (``os.cpu_count``)."""
    online = os.cpu_count() or 1
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity on this platform
        usable = online
    return max(1, usable), online


@dataclass(frozen=True)
class WorkerSize:
    """One worker process's size, and the machine facts it was chosen from."""

    usable_cores: int
    cpu_count: int
    lanes: int
    threads: int
    prefetch: int

    def as_json(self) -> dict[str, int]:
        """The size as doctor's ``--json`` shows it."""
        return asdict(self)

    def describe(self) -> str:
        """One line for doctor and the worker's log."""
        return (
            f"{self.lanes} launch lanes and {self.threads} threads per worker process, "
            f"prefetch {self.prefetch} (usable cores {self.usable_cores} of {self.cpu_count})"
        )


def worker_size(
    threads: int | None = None, lanes: int | None = None, cores: tuple[int, int] | None = None
) -> WorkerSize:
    """The size of a worker process: what the caller gave, the rest from the machine
    (``cores``: ``(usable, online)``, by default ``usable_cores()``).

    Lanes default to the usable cores (at most the threads given); threads to
    ``THREADS_PER_LANE`` per lane.
    Raises InvalidInput for fewer than one thread or lane, or more lanes than threads (a
    lane no thread can enter).
    """
    usable, online = cores or usable_cores()
    for name, value in (("--threads", threads), ("--lanes", lanes)):
        if value is not None and value < 1:
            raise InvalidInput(f"{name}: {value} is below 1")
    if lanes is None:
        lanes = usable if threads is None else min(usable, threads)
    if threads is None:
        threads = lanes * THREADS_PER_LANE
    if lanes > threads:
        raise InvalidInput(f"--lanes: {lanes} exceeds --threads {threads}; no thread could use it")
    return WorkerSize(usable, online, lanes, threads, prefetch=threads)
