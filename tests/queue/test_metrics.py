"""Prometheus metrics read from the store and the broker at scrape time."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from prometheus_client import Metric
from sqlalchemy import insert

from probe_service.plans import parse_plan
from probe_service.queue import InlineQueue, ProbeQueue, WorkerContext, execute_run, submit_plans
from probe_service.queue.heartbeats import note_alive
from probe_service.queue.metrics import StoreCollector
from probe_service.queue.runs import claim_run, finish_run, now_ms
from probe_service.queue.tables import worker_heartbeats
from probe_service.settings import read_settings
from probe_service.store import Store, open_store
from probe_service.store.engine import create_store_engine

from ..conftest import fresh_redis_namespace, fresh_schema, make_searchable
from ..stubsandbox import StubSandbox
from .conftest import POLICY_ID, capture_hello, shell_plan, write_policy_file


@pytest.fixture(scope="module")
def scraped(
    tmp_path_factory: pytest.TempPathFactory, postgres_base_url: str, redis_url: str
) -> Iterator[dict[str, Metric]]:
    """One scrape after: a supported run, a canary stop, and two runs waiting in Redis.

    Module-scoped: every test reads the same scrape, so the run, the schema and the
    snapshot are made once, in resources of its own. The run executes through the stub
    sandbox: these tests are about what the store and the broker report, not the probe.
    """
    root = tmp_path_factory.mktemp("metrics")
    make_searchable(root)
    with ExitStack() as stack:
        patch = stack.enter_context(pytest.MonkeyPatch.context())
        patch.setenv("BYTE_PROBE_POLICY_FILE", str(write_policy_file(root)))
        store = open_store(root, stack.enter_context(fresh_schema(postgres_base_url)))
        stack.callback(store.close)
        namespace = stack.enter_context(fresh_redis_namespace(redis_url))
        queue = ProbeQueue(redis_url, namespace=namespace)
        stack.callback(queue.close)
        snapshot_id = capture_hello(store, root)
        plans = [parse_plan(shell_plan(snapshot_id, f"exit 0 # m{i}", f"m{i}")) for i in range(4)]
        first = submit_plans(store, InlineQueue(read_settings()), plans[:2], POLICY_ID).run_ids
        submit_plans(store, queue, plans[2:], POLICY_ID)
        execute_run(WorkerContext(store=store, backend=StubSandbox()), first[0])
        claim_run(store, first[1], "worker-a", 60_000)
        finish_run(
            store,
            first[1],
            outcome="inconclusive",
            reason="canary_readable",
            receipt_sha256=None,
            action_key=None,
        )
        yield {m.name: m for m in StoreCollector(store, queue).collect()}


def _value(metric: Metric, sample_name: str, **labels: str) -> float:
    return next(s.value for s in metric.samples if s.name == sample_name and s.labels == labels)


class TestStoreCollector:
    def test_store_is_up(self, scraped: dict[str, Metric]) -> None:
        """A scrape that reached the store reports byte_probe_up 1."""
        assert _value(scraped["byte_probe_up"], "byte_probe_up") == 1

    def test_queue_depth(self, scraped: dict[str, Metric]) -> None:
        """Messages waiting in Redis are reported as the queue depth."""
        assert _value(scraped["byte_probe_queue_depth"], "byte_probe_queue_depth") == 2

    def test_runs_by_state(self, scraped: dict[str, Metric]) -> None:
        """Runs are counted by state."""
        metric = scraped["byte_probe_runs"]
        assert _value(metric, "byte_probe_runs", state="queued") == 2
        assert _value(metric, "byte_probe_runs", state="done") == 2

    def test_runs_by_outcome_and_reason(self, scraped: dict[str, Metric]) -> None:
        """Finished runs are counted by outcome and reason."""
        metric = scraped["byte_probe_runs_done"]
        name = "byte_probe_runs_done_total"
        assert _value(metric, name, outcome="supports", reason="oracle_passed") == 1
        assert _value(metric, name, outcome="inconclusive", reason="canary_readable") == 1

    def test_canary_failures(self, scraped: dict[str, Metric]) -> None:
        """Runs stopped by the canary are counted on their own."""
        metric = scraped["byte_probe_canary_failures"]
        assert _value(metric, "byte_probe_canary_failures_total") == 1

    def test_duration_histogram_counts_each_receipt(self, scraped: dict[str, Metric]) -> None:
        """The probe duration histogram holds the one executed run's wall time."""
        metric = scraped["byte_probe_duration_seconds"]
        assert _value(metric, "byte_probe_duration_seconds_count") == 1
        assert _value(metric, "byte_probe_duration_seconds_bucket", le="+Inf") == 1

    def test_latency_histogram_counts_each_finished_run(self, scraped: dict[str, Metric]) -> None:
        """The submit-to-receipt histogram holds one value per finished run."""
        metric = scraped["byte_probe_submit_to_receipt_seconds"]
        assert _value(metric, "byte_probe_submit_to_receipt_seconds_count") == 2

    def test_store_outage_reports_down(self, tmp_path: Path) -> None:
        """When the store cannot answer, the scrape yields only byte_probe_up 0."""
        url = "postgresql+psycopg://nobody@127.0.0.1:1/none"  # nothing listens on port 1
        unreachable = Store(create_store_engine(url), root=tmp_path, url=url)
        metrics = list(StoreCollector(unreachable, None).collect())
        unreachable.close()
        assert [(m.name, m.samples[0].value) for m in metrics] == [("byte_probe_up", 0)]


class TestPhaseHistograms:
    def test_every_phase_of_the_executed_run_is_exported(self, scraped: dict[str, Metric]) -> None:
        """The one queued, executed run contributes one value to each phase's histogram."""
        metric = scraped["byte_probe_phase_seconds"]
        for phase in ("queued", "materialize", "canary", "launch", "execute", "evaluate", "write"):
            assert _value(metric, "byte_probe_phase_seconds_count", phase=phase) == 1, phase
            assert _value(metric, "byte_probe_phase_seconds_bucket", phase=phase, le="+Inf") == 1


class TestLossMetrics:
    def test_worker_lost_reattempted_and_alive_workers_are_store_wide(
        self, shared_store: Store, snapshot_id: str, policy_file: Path
    ) -> None:
        """A run ended worker_lost, a run taken twice and two live workers' notes show in
        the store-wide scrape; a note older than a minute does not count as alive."""
        plans = [parse_plan(shell_plan(snapshot_id, f"exit 0 # l{i}", f"l{i}")) for i in range(2)]
        lost, again = submit_plans(
            shared_store, InlineQueue(read_settings()), plans, POLICY_ID
        ).run_ids
        for _ in range(2):
            claim_run(shared_store, again, "worker-a", 1)
        claim_run(shared_store, lost, "worker-a", 60_000)
        finish_run(
            shared_store,
            lost,
            outcome="inconclusive",
            reason="worker_lost",
            receipt_sha256=None,
            action_key=None,
        )
        note_alive(shared_store, "host:1", "byte-probe", ["probes"])
        note_alive(shared_store, "host:2", "byte-probe", ["probes", "other"])
        with shared_store.transaction() as conn:
            conn.execute(
                insert(worker_heartbeats).values(
                    owner="host:3",
                    queue="probes",
                    namespace="byte-probe",
                    seen_ms=now_ms() - 120_000,
                )
            )
        scraped = {m.name: m for m in StoreCollector(shared_store, None).collect()}
        assert (
            _value(scraped["byte_probe_runs_worker_lost"], "byte_probe_runs_worker_lost_total") == 1
        )
        assert _value(scraped["byte_probe_runs_reattempted"], "byte_probe_runs_reattempted") == 1
        assert _value(scraped["byte_probe_workers_alive"], "byte_probe_workers_alive") == 2
