"""The actor body, the janitor, the retry rule and the worker process's prefetch."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dramatiq
import pytest
from sqlalchemy import func, select

from probe_service.errors import (
    BrokerUnavailable,
    InvalidPlan,
    PolicyError,
    StoreUnavailable,
)
from probe_service.plans import parse_plan
from probe_service.plans.tables import receipts
from probe_service.queue import (
    InlineQueue,
    ProbeQueue,
    WorkerContext,
    execute_run,
    reap_runs,
    submit_plans,
    worker_process,
)
from probe_service.queue.broker import _retry_infrastructure
from probe_service.queue.runs import claim_run, expired_runs
from probe_service.queue.tables import DEFAULT_NAMESPACE, runs
from probe_service.settings import read_settings
from probe_service.store import Store
from probe_service.store.events import publish_events
from probe_service.store.schema import events

from ..stubsandbox import StubSandbox
from .conftest import POLICY_ID, shell_plan


def _submit_one(store: Store, snapshot_id: str, script: str = "exit 0") -> str:
    plan = parse_plan(shell_plan(snapshot_id, script, f"execute {script}"))
    return submit_plans(store, InlineQueue(read_settings()), [plan], POLICY_ID).run_ids[0]


def _run_row(store: Store, run_id: str) -> Any:
    with store.reading() as conn:
        return conn.execute(select(runs).where(runs.c.run_id == run_id)).one()


def _count(store: Store, table: Any, *where: Any) -> int:
    with store.reading() as conn:
        publish_events(conn)  # events written on PostgreSQL are counted once numbered
        return int(conn.execute(select(func.count()).select_from(table).where(*where)).scalar_one())


def _claim_with_tiny_lease(store: Store, run_id: str) -> None:
    """A worker claims the run with a 1 ms lease and vanishes; wait until it expires."""
    claim_run(store, run_id, "vanished-worker", 1)
    while not any(r.run_id == run_id for r in expired_runs(store, DEFAULT_NAMESPACE)):
        time.sleep(0.005)


@pytest.fixture
def queue(redis_url: str, redis_namespace: str) -> Iterator[ProbeQueue]:
    """A sender on a fresh Redis namespace."""
    sender = ProbeQueue(redis_url, namespace=redis_namespace)
    yield sender
    sender.close()


class TestExecuteRun:
    def test_duplicate_delivery_writes_nothing_twice(
        self, shared_store: Store, snapshot_id: str, policy_file: Path, stub_sandbox: StubSandbox
    ) -> None:
        """A second delivery of a done run is acked: no second receipt, no second event,
        and the worker counts one executed run (docs/ARCHITECTURE.md, "Metrics")."""
        run_id = _submit_one(shared_store, snapshot_id)
        ctx = WorkerContext(store=shared_store, backend=stub_sandbox)
        assert execute_run(ctx, run_id) == "supports"
        assert execute_run(ctx, run_id) == "already_done"
        assert len(stub_sandbox.executions) == 1
        counts, busy = ctx.counters.snapshot()
        assert (counts["runs_executed"], busy) == (1, 0)
        assert _count(shared_store, receipts, receipts.c.run_id == run_id) == 1
        probe_events = _count(
            shared_store, events, events.c.kind == "probe", events.c.payload.contains(run_id)
        )
        assert probe_events == 1


class TestReapRuns:
    def test_expired_run_is_requeued_and_resent(
        self, shared_store: Store, snapshot_id: str, policy_file: Path, queue: ProbeQueue
    ) -> None:
        """A run whose worker vanished goes back to queued with a message in Redis."""
        run_id = _submit_one(shared_store, snapshot_id)
        _claim_with_tiny_lease(shared_store, run_id)
        ctx = WorkerContext(store=shared_store, max_attempts=3)
        counts = reap_runs(ctx, queue.enqueue)
        assert counts == {"requeued": 1, "abandoned": 0, "resent": 0}
        assert (_run_row(shared_store, run_id).state, queue.depth()) == ("queued", 1)

    def test_run_out_of_attempts_is_abandoned_as_worker_lost(
        self, shared_store: Store, snapshot_id: str, policy_file: Path, queue: ProbeQueue
    ) -> None:
        """A run that lost its worker on its last attempt ends with a worker_lost receipt."""
        run_id = _submit_one(shared_store, snapshot_id)
        _claim_with_tiny_lease(shared_store, run_id)
        ctx = WorkerContext(store=shared_store, max_attempts=1)
        assert reap_runs(ctx, queue.enqueue)["abandoned"] == 1
        row = _run_row(shared_store, run_id)
        assert (row.state, row.outcome, row.reason) == ("done", "inconclusive", "worker_lost")
        assert row.receipt_sha256 is not None
        assert _count(shared_store, receipts, receipts.c.run_id == run_id) == 1
        assert queue.depth() == 0


class TestRetryRule:
    @pytest.mark.parametrize("exc", [StoreUnavailable("db down"), BrokerUnavailable("redis down")])
    def test_infrastructure_errors_are_retried(self, exc: Exception) -> None:
        """An unavailable store or broker retries the message."""
        assert _retry_infrastructure(0, exc) is True

    @pytest.mark.parametrize(
        "exc", [PolicyError("no"), InvalidPlan("bad"), RuntimeError("bug"), ValueError("x")]
    )
    def test_other_errors_are_not_retried(self, exc: Exception) -> None:
        """Bad input and programming errors are never retried."""
        assert _retry_infrastructure(0, exc) is False

    def test_infrastructure_retries_are_bounded(self) -> None:
        """Even infrastructure errors stop being retried after the retry budget."""
        assert _retry_infrastructure(10_000, StoreUnavailable("still down")) is False


class _StartThenStop(dramatiq.Worker):  # type: ignore[misc]
    """A real dramatiq Worker that asks its process to stop once it has started."""

    started: list[_StartThenStop] = []  # noqa: RUF012 - one test's record

    def start(self) -> None:
        super().start()
        _StartThenStop.started.append(self)
        os.kill(os.getpid(), signal.SIGTERM)  # the worker process's own stop signal


class TestWorkerProcess:
    def test_prefetch_equals_threads(
        self,
        monkeypatch: pytest.MonkeyPatch,
        pg_url: str,
        redis_url: str,
        redis_namespace: str,
        policy_file: Path,
        tmp_path: Path,
    ) -> None:
        """A worker process prefetches as many messages as it has threads, not dramatiq's 2x."""
        monkeypatch.setenv("PROBE_REDIS_URL", redis_url)
        monkeypatch.setenv("PROBE_REDIS_NAMESPACE", redis_namespace)
        monkeypatch.setenv("PROBE_DATABASE_URL", pg_url)
        monkeypatch.setattr(worker_process.dramatiq, "Worker", _StartThenStop)
        saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
        _StartThenStop.started.clear()
        try:
            assert worker_process.main(["--threads", "3", "--root", str(tmp_path)]) == 0
        finally:
            for sig, handler in saved.items():
                signal.signal(sig, handler)
        (worker,) = _StartThenStop.started
        assert worker.queue_prefetch == 3
        assert {
            c.prefetch for c in worker.consumers.values() if not c.queue_name.endswith(".DQ")
        } == {3}
