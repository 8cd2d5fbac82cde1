"""A worker process's default size, chosen from the machine (docs/ARCHITECTURE.md,
"Pipelined worker")."""

from __future__ import annotations

import os

import pytest

from probe_service.errors import InvalidInput
from probe_service.queue import sizing
from probe_service.queue.sizing import THREADS_PER_LANE, WorkerSize, usable_cores, worker_size


class TestUsableCores:
    def test_affinity_wins_over_the_cores_online(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A process pinned to 3 of 8 cores counts 3 usable."""
        monkeypatch.setattr(sizing.os, "sched_getaffinity", lambda _pid: {0, 2, 5})
        monkeypatch.setattr(sizing.os, "cpu_count", lambda: 8)
        assert usable_cores() == (3, 8)

    def test_without_affinity_the_cores_online_count(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Where the platform has no affinity call, every online core is usable."""
        monkeypatch.delattr(sizing.os, "sched_getaffinity")
        monkeypatch.setattr(sizing.os, "cpu_count", lambda: 4)
        assert usable_cores() == (4, 4)

    def test_this_machine(self) -> None:
        """On this machine the usable cores are this process's affinity."""
        assert usable_cores() == (len(os.sched_getaffinity(0)), os.cpu_count())


class TestWorkerSize:
    def test_defaults_come_from_the_machine(self) -> None:
        """A lane per usable core, two threads per lane, one message prefetched per thread."""
        size = worker_size(cores=(3, 8))
        assert size == WorkerSize(usable_cores=3, cpu_count=8, lanes=3, threads=6, prefetch=6)
        assert THREADS_PER_LANE == 2

    def test_given_threads_bound_the_default_lanes(self) -> None:
        """With fewer threads than cores, every thread may launch."""
        assert (
            worker_size(threads=2, cores=(8, 8)).lanes,
            worker_size(threads=12, cores=(8, 8)).lanes,
        ) == (2, 8)

    def test_given_lanes_size_the_default_threads(self) -> None:
        """One lane gets two threads: the second prepares while the first launches."""
        size = worker_size(lanes=1, cores=(8, 8))
        assert (size.lanes, size.threads, size.prefetch) == (1, 2, 2)

    def test_more_lanes_than_threads_is_refused(self) -> None:
        """A lane no thread could enter is a mistake, named with both flags."""
        with pytest.raises(InvalidInput, match=r"--lanes: 3 exceeds --threads 2"):
            worker_size(threads=2, lanes=3)

    @pytest.mark.parametrize(
        ("threads", "lanes", "flag"), [(0, None, "--threads"), (None, 0, "--lanes")]
    )
    def test_below_one_is_refused(self, threads: int | None, lanes: int | None, flag: str) -> None:
        """Zero threads or lanes would run nothing; refused naming the flag."""
        with pytest.raises(InvalidInput, match=f"{flag}: 0 is below 1"):
            worker_size(threads=threads, lanes=lanes)

    def test_description_names_every_figure(self) -> None:
        """The line doctor and the worker's log print names lanes, threads, prefetch, cores."""
        line = worker_size(cores=(2, 4)).describe()
        assert line == (
            "2 launch lanes and 4 threads per worker process, prefetch 4 (usable cores 2 of 4)"
        )
