"""The pipelined worker: more threads than launch lanes, so run N+1 is taken, prepared and
materialized while run N is in the sandbox, and launches never outnumber the lanes
(docs/ARCHITECTURE.md, "Pipelined worker").

The ordering tests run a real dramatiq worker on Redis and PostgreSQL over the stub
sandbox, whose answer blocks on events (never a sleep); one test runs the real sandbox.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import dramatiq
import pytest

from probe_service.plans import Plan, parse_plan
from probe_service.plans.lanes import LaunchLanes
from probe_service.queue import DEFAULT_QUEUE, ProbeQueue, WorkerContext, submit_plans
from probe_service.queue.metrics import WorkerCollector, exposition
from probe_service.queue.sizing import worker_size
from probe_service.queue.status import read_run_status
from probe_service.queue.worker_process import start_consuming
from probe_service.store import Store

from ..stubsandbox import Canned, StubSandbox
from .conftest import POLICY_ID, shell_plan
from .test_worker_metrics import _samples

#: A liveness bound only: a wait that passes it fails the test instead of hanging it.
#: Nothing is asserted about how long anything took.
STUCK_S = 60.0


class WatchedLanes(LaunchLanes):
    """Real lanes that also say how many runs have asked for one (each run asks after
    it was taken, prepared and materialized)."""

    def __init__(self, count: int) -> None:
        super().__init__(count)
        self.asked = threading.Semaphore(0)

    @contextmanager
    def hold(self) -> Iterator[None]:
        self.asked.release()
        with super().hold():
            yield


class Launches:
    """The stub's launches: each blocks until released, and the most inside at once."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.arrived = threading.Semaphore(0)
        self._lock = threading.Lock()
        self.inside = 0
        self.peak = 0
        self.order: list[str] = []

    def answer(self, plan: Plan) -> Canned:
        with self._lock:
            self.inside += 1
            self.peak = max(self.peak, self.inside)
            self.order.append(f"start {plan.args[-1]}")
        self.arrived.release()
        try:
            if plan.args[-1].startswith("block"):
                assert self.release.wait(STUCK_S), "the test never released the launch"
        finally:
            with self._lock:
                self.inside -= 1
                self.order.append(f"end {plan.args[-1]}")
        return Canned()


def _acquire(semaphore: threading.Semaphore, times: int = 1) -> None:
    for _ in range(times):
        assert semaphore.acquire(timeout=STUCK_S), "the worker never got there"


@pytest.fixture
def farm_worker(
    shared_store: Store, redis_url: str, redis_namespace: str, policy_file: Path
) -> Iterator[Callable[..., tuple[WorkerContext, ProbeQueue]]]:
    """Start a real dramatiq worker of a given size over ``backend``; stopped after."""
    started: list[tuple[ProbeQueue, dramatiq.Worker]] = []

    def start(
        backend: object, lanes: LaunchLanes, threads: int
    ) -> tuple[WorkerContext, ProbeQueue]:
        ctx = WorkerContext(store=shared_store, backend=backend, namespace=redis_namespace)  # type: ignore[arg-type]
        ctx.lanes = lanes
        size = worker_size(threads=threads, lanes=lanes.count)
        queue, worker = start_consuming(ctx, redis_url, [DEFAULT_QUEUE], size)
        started.append((queue, worker))
        return ctx, queue

    yield start
    for queue, worker in started:
        worker.stop()
        queue.close()


def _submit(store: Store, queue: ProbeQueue, snapshot_id: str, *scripts: str) -> list[str]:
    plans = [parse_plan(shell_plan(snapshot_id, script, script)) for script in scripts]
    return submit_plans(store, queue, plans, POLICY_ID).run_ids


def _done(ctx: WorkerContext) -> threading.Semaphore:
    """A semaphore released once per run that ends in ``ctx``."""
    ended = threading.Semaphore(0)
    ctx.after_run = lambda *_: ended.release()
    return ended


class TestPipelinedWorker:
    def test_next_run_is_prepared_while_the_previous_one_launches(
        self,
        farm_worker: Callable[..., tuple[WorkerContext, ProbeQueue]],
        shared_store: Store,
        snapshot_id: str,
    ) -> None:
        """With one lane and two threads, run 2 is taken, prepared and materialized (it
        asks for the lane) while run 1 is still inside it, and launches only after it."""
        launches, lanes = Launches(), WatchedLanes(1)
        ctx, queue = farm_worker(StubSandbox(launches.answer), lanes, threads=2)
        ended = _done(ctx)
        (first,) = _submit(shared_store, queue, snapshot_id, "block first")
        _acquire(launches.arrived)  # run 1 is in the sandbox, holding the one lane
        _acquire(lanes.asked)
        (second,) = _submit(shared_store, queue, snapshot_id, "then second")
        _acquire(lanes.asked)  # run 2 got all the way to the lane meanwhile
        assert read_run_status(shared_store, second).state == "running"
        assert (lanes.busy, launches.inside, launches.order) == (1, 1, ["start block first"])
        launches.release.set()
        _acquire(ended, 2)
        assert launches.order == [
            "start block first",
            "end block first",
            "start then second",
            "end then second",
        ]
        for run_id in (first, second):
            assert read_run_status(shared_store, run_id).outcome == "supports"
        assert lanes.peak == 1

    def test_launches_never_outnumber_the_lanes(
        self,
        farm_worker: Callable[..., tuple[WorkerContext, ProbeQueue]],
        shared_store: Store,
        snapshot_id: str,
    ) -> None:
        """Four threads, two lanes, six blocked runs: two launch, two more wait prepared
        at the lanes (the busy-lanes gauge says 2 of 2), and never more than two are
        inside the sandbox at once."""
        launches, lanes = Launches(), WatchedLanes(2)
        ctx, queue = farm_worker(StubSandbox(launches.answer), lanes, threads=4)
        ended = _done(ctx)
        scripts = [f"block {i}" for i in range(6)]
        run_ids = _submit(shared_store, queue, snapshot_id, *scripts)
        _acquire(lanes.asked, 4)  # every thread has a prepared run at the lanes
        _acquire(launches.arrived, 2)
        assert (lanes.busy, launches.inside) == (2, 2)
        scrape = _samples(exposition(WorkerCollector(ctx.counters)).decode())
        worker = (("worker", ctx.owner),)
        assert scrape[("byte_probe_worker_busy_lanes", worker)] == 2
        assert scrape[("byte_probe_worker_lanes", worker)] == 2
        launches.release.set()
        _acquire(ended, 6)
        assert (launches.peak, lanes.peak, lanes.entered) == (2, 2, 6)
        assert {read_run_status(shared_store, r).outcome for r in run_ids} == {"supports"}

    def test_real_sandbox_runs_through_the_lanes(
        self,
        farm_worker: Callable[..., tuple[WorkerContext, ProbeQueue]],
        shared_store: Store,
        snapshot_id: str,
    ) -> None:
        """The real backend holds a lane for each launch: three real probes on one lane and
        two threads all pass, one launch at a time."""
        from probe_service.plans.execution import RuntimeBackend

        lanes = LaunchLanes(1)
        ctx, queue = farm_worker(RuntimeBackend(), lanes, threads=2)
        ended = _done(ctx)
        run_ids = _submit(shared_store, queue, snapshot_id, "exit 0", "true", "test -d .")
        _acquire(ended, 3)
        assert [read_run_status(shared_store, r).outcome for r in run_ids] == ["supports"] * 3
        assert (lanes.entered, lanes.peak, lanes.busy) == (3, 1, 0)
