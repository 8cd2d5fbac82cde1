"""Each worker's own counters, and a farm whose per-worker exports sum to the store's count."""

from __future__ import annotations

import socket
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import update

from probe_service.errors import StoreUnavailable
from probe_service.plans import parse_plan
from probe_service.queue import (
    ProbeQueue,
    WorkerContext,
    execute_run,
    reap_runs,
    submit_plans,
)
from probe_service.queue.metrics import WorkerCollector, exposition
from probe_service.queue.runs import claim_run
from probe_service.queue.supervisor import WorkerMetrics
from probe_service.queue.tables import runs
from probe_service.queue.worker_process import janitor_tick
from probe_service.store import Store
from probe_service.store.engine import create_store_engine

from ..stubsandbox import StubSandbox
from .conftest import POLICY_ID, Farm, shell_plan, wait_done
from .test_execute import _claim_with_tiny_lease, _submit_one

#: Liveness bound for a worker's counter to catch up with the store (it is added just
#: after the run's finishing transaction): a stall fails, a slow machine does not.
CATCH_UP_S = 60.0


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """``(sample name, sorted labels) -> value`` of one scrape in the text format."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _counts(ctx: WorkerContext) -> dict[str, int]:
    return ctx.counters.snapshot()[0]


class TestWorkerCounters:
    def test_a_run_taken_on_a_later_attempt_counts_as_a_reattempt(
        self, shared_store: Store, snapshot_id: str, policy_file: Path, stub_sandbox: StubSandbox
    ) -> None:
        """A run whose first worker vanished counts as a reattempt where it runs next."""
        run_id = _submit_one(shared_store, snapshot_id)
        _claim_with_tiny_lease(shared_store, run_id)
        ctx = WorkerContext(store=shared_store, backend=stub_sandbox)
        assert execute_run(ctx, run_id) == "supports"
        assert (_counts(ctx)["run_reattempts"], _counts(ctx)["runs_executed"]) == (1, 1)

    def test_an_infrastructure_error_counts_a_retry(
        self, shared_store: Store, snapshot_id: str, policy_file: Path
    ) -> None:
        """A delivery given back to the broker (store unavailable) counts as a retry."""
        run_id = _submit_one(shared_store, snapshot_id)
        ctx = WorkerContext(store=shared_store, backend=StubSandbox())

        def down(*_: object, **__: object) -> object:
            raise StoreUnavailable("take run: store unavailable (test)")

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(shared_store, "retrying", down)
            with pytest.raises(StoreUnavailable):
                execute_run(ctx, run_id)
        assert (_counts(ctx)["retries"], _counts(ctx)["runs_executed"]) == (1, 0)
        assert ctx.counters.snapshot()[1] == 0

    def test_a_lease_taken_away_counts_once_and_a_finished_run_never(
        self, shared_store: Store, snapshot_id: str, policy_file: Path
    ) -> None:
        """A held run another worker took counts one lost lease over two renewals; a held
        run that is done (finished between two ticks) is not lost."""
        lost_id = _submit_one(shared_store, snapshot_id)
        done_id = _submit_one(shared_store, snapshot_id, "exit 1")
        ctx = WorkerContext(store=shared_store, backend=StubSandbox())
        for run_id in (lost_id, done_id):
            assert claim_run(shared_store, run_id, ctx.owner, 60_000).run is not None
        with shared_store.transaction() as conn:
            conn.execute(update(runs).where(runs.c.run_id == lost_id).values(lease_owner="thief"))
            conn.execute(update(runs).where(runs.c.run_id == done_id).values(state="done"))
        with ctx.leases.holding(lost_id), ctx.leases.holding(done_id):
            assert ctx.leases.renew([lost_id, done_id]) == 0
            assert ctx.leases.renew([lost_id, done_id]) == 0
        assert _counts(ctx)["leases_lost"] == 1

    def test_the_janitor_counts_requeues_and_runs_lost(
        self,
        shared_store: Store,
        snapshot_id: str,
        policy_file: Path,
        redis_url: str,
        redis_namespace: str,
    ) -> None:
        """A requeued expired run and a run abandoned worker_lost are counted by the
        janitor that did it."""
        queue = ProbeQueue(redis_url, namespace=redis_namespace)
        try:
            requeued = _submit_one(shared_store, snapshot_id)
            _claim_with_tiny_lease(shared_store, requeued)
            ctx = WorkerContext(store=shared_store, max_attempts=3)
            assert reap_runs(ctx, queue.enqueue)["requeued"] == 1
            abandoned = _submit_one(shared_store, snapshot_id, "exit 2")
            _claim_with_tiny_lease(shared_store, abandoned)
            lasts = WorkerContext(store=shared_store, max_attempts=1)
            assert reap_runs(lasts, queue.enqueue)["abandoned"] == 1
        finally:
            queue.close()
        assert (_counts(ctx)["requeues"], _counts(ctx)["runs_lost"]) == (1, 0)
        assert (_counts(lasts)["requeues"], _counts(lasts)["runs_lost"]) == (0, 1)

    def test_a_janitor_tick_that_misses_the_store_shows_store_down(
        self, shared_store: Store, tmp_path: Path, redis_url: str, redis_namespace: str
    ) -> None:
        """store_up is 0 after a tick that could not reach the store, 1 after one that did."""
        url = "postgresql+psycopg://nobody@127.0.0.1:1/none"  # nothing listens on port 1
        unreachable = Store(create_store_engine(url), root=tmp_path, url=url)
        queue = ProbeQueue(redis_url, namespace=redis_namespace)
        try:
            down = WorkerContext(store=unreachable, backend=StubSandbox())
            janitor_tick(down, queue, ["probes"])
            up = WorkerContext(store=shared_store, backend=StubSandbox())
            up.counters.store_up = False
            janitor_tick(up, queue, ["probes"])
        finally:
            queue.close()
            unreachable.close()
        assert (down.counters.store_up, up.counters.store_up) == (False, True)

    def test_the_export_labels_every_sample_with_the_worker(
        self, shared_store: Store, snapshot_id: str, policy_file: Path, stub_sandbox: StubSandbox
    ) -> None:
        """A worker's scrape holds its counters and thread gauges, each labelled with its
        name, and none of the store-wide metrics."""
        ctx = WorkerContext(store=shared_store, backend=stub_sandbox, owner="host-a:1", threads=3)
        execute_run(ctx, _submit_one(shared_store, snapshot_id))
        samples = _samples(exposition(WorkerCollector(ctx.counters)).decode())
        assert {labels for _, labels in samples} == {(("worker", "host-a:1"),)}
        assert samples[("byte_probe_worker_runs_executed_total", (("worker", "host-a:1"),))] == 1
        assert samples[("byte_probe_worker_threads", (("worker", "host-a:1"),))] == 3
        assert not any(name.startswith("byte_probe_runs") for name, _ in samples)


def _ports(count: int) -> int:
    """A base port with ``count`` consecutive free loopback ports."""
    for _ in range(100):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base = int(probe.getsockname()[1])
        if base + count > 65535:
            continue
        try:
            for port in range(base, base + count):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    pytest.fail("no run of free ports")


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        return str(answer.read().decode())


def _executed(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> float:
    return sum(
        v for (name, _), v in samples.items() if name == "byte_probe_worker_runs_executed_total"
    )


class TestFarmExports:
    def test_worker_process_i_serves_on_port_plus_i(self) -> None:
        """The supervisor gives process i (and each replacement of it) port + i; port 0
        serves none."""
        metrics = WorkerMetrics(9191, "10.0.0.11")
        assert metrics.argv(1) == ["--metrics-port", "9192", "--metrics-host", "10.0.0.11"]
        assert WorkerMetrics().argv(3) == []

    @pytest.mark.timeout(600)
    def test_two_workers_exports_sum_to_the_runs_the_store_counts(
        self,
        shared_store: Store,
        snapshot_id: str,
        start_farm: Callable[..., Farm],
        redis_url: str,
        redis_namespace: str,
    ) -> None:
        """Two worker processes (real sandbox) each export only their own counters, under
        their own worker label; summed over both targets they equal the store-wide count of
        finished runs, which only the supervisor's --store-metrics-port serves."""
        base = _ports(3)
        farm = start_farm(processes=2, threads=2, metrics_port=base, store_metrics_port=base + 2)
        queue = ProbeQueue(redis_url, namespace=redis_namespace)
        try:
            plans = [
                parse_plan(shell_plan(snapshot_id, f"exit 0 # {i}", f"m{i}")) for i in range(8)
            ]
            batch = submit_plans(shared_store, queue, plans, POLICY_ID)
            wait_done(shared_store, batch.batch_id, len(plans))
        finally:
            queue.close()
        store_wide = _samples(_scrape(base + 2))
        passed = (("outcome", "supports"), ("reason", "oracle_passed"))
        done = store_wide[("byte_probe_runs_done_total", passed)]
        assert done == len(plans)
        assert store_wide[("byte_probe_workers_alive", ())] == 2
        assert not any(name.startswith("byte_probe_worker_") for name, _ in store_wide)
        deadline = time.monotonic() + CATCH_UP_S
        while True:
            scrapes = [_samples(_scrape(port)) for port in (base, base + 1)]
            if sum(_executed(s) for s in scrapes) == done or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert sum(_executed(s) for s in scrapes) == done
        workers = [{dict(labels)["worker"] for _, labels in s} for s in scrapes]
        assert all(len(w) == 1 for w in workers), workers
        assert workers[0] != workers[1]
        for scrape, (worker,) in zip(scrapes, workers, strict=True):
            assert not any(name.startswith("byte_probe_runs") for name, _ in scrape)
            assert ("byte_probe_up", ()) not in scrape
            assert scrape[("byte_probe_worker_threads", (("worker", worker),))] == 2
        farm.stop()
