"""A run belongs to the queue namespace it was submitted to: no other namespace sends or
executes it (the bug: a run whose wait timed out ran five minutes later on a worker
listening on a different PROBE_REDIS_NAMESPACE)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from alembic import command
from sqlalchemy import func, select, text

from probe_service.errors import InfrastructureError, InvalidInput
from probe_service.plans import parse_plan
from probe_service.plans.tables import receipts
from probe_service.queue import (
    InlineQueue,
    ProbeQueue,
    Queue,
    WorkerContext,
    execute_run,
    reap_runs,
    resume_batch,
    submit_plans,
)
from probe_service.queue.runs import claim_run, expired_runs
from probe_service.queue.tables import runs
from probe_service.settings import read_settings
from probe_service.store import Store
from probe_service.store.engine import create_store_engine
from probe_service.store.migrate import _config, upgrade_to_head

from .. import calls as service
from .conftest import POLICY_ID, Farm, shell_plan


@pytest.fixture
def other_namespace(redis_url: str) -> Iterator[str]:
    """A second fresh Redis namespace (a second deployment on the same Redis)."""
    namespace = f"test-other-{uuid.uuid4().hex[:12]}"
    yield namespace
    client = redis.Redis.from_url(redis_url)
    keys = list(client.scan_iter(f"{namespace}*"))
    if keys:
        client.delete(*keys)
    client.close()


@pytest.fixture
def queues(
    redis_url: str, redis_namespace: str, other_namespace: str
) -> Iterator[tuple[ProbeQueue, ProbeQueue]]:
    """Senders on namespace A (the submitter's) and B (another deployment's)."""
    a = ProbeQueue(redis_url, namespace=redis_namespace)
    b = ProbeQueue(redis_url, namespace=other_namespace)
    yield a, b
    a.close()
    b.close()


def _run_row(store: Store, run_id: str) -> Any:
    with store.reading() as conn:
        return conn.execute(select(runs).where(runs.c.run_id == run_id)).one()


def _receipt_count(store: Store, run_id: str) -> int:
    with store.reading() as conn:
        query = select(func.count()).select_from(receipts).where(receipts.c.run_id == run_id)
        return int(conn.execute(query).scalar_one())


def _submit(store: Store, snapshot_id: str, queue: Queue) -> str:
    plan = parse_plan(shell_plan(snapshot_id, "exit 0", f"ns {uuid.uuid4().hex}"))
    return submit_plans(store, queue, [plan], POLICY_ID).run_ids[0]


class TestSubmit:
    def test_run_row_records_the_queue_namespace(
        self, shared_store: Store, snapshot_id: str, queues: tuple[ProbeQueue, ProbeQueue]
    ) -> None:
        """Submitting through a queue stores that queue's namespace on the run."""
        a, b = queues
        assert _run_row(shared_store, _submit(shared_store, snapshot_id, a)).namespace == (
            a.namespace
        )
        assert _run_row(shared_store, _submit(shared_store, snapshot_id, b)).namespace == (
            b.namespace
        )

    def test_submit_without_broker_uses_the_configured_namespace(
        self, shared_store: Store, snapshot_id: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """With no broker, the run belongs to PROBE_REDIS_NAMESPACE (the janitor's)."""
        monkeypatch.setenv("PROBE_REDIS_NAMESPACE", "deployment-x")
        queue = InlineQueue(read_settings())
        assert _run_row(shared_store, _submit(shared_store, snapshot_id, queue)).namespace == (
            "deployment-x"
        )


class TestJanitor:
    def test_janitor_of_another_namespace_never_resends(
        self, shared_store: Store, snapshot_id: str, queues: tuple[ProbeQueue, ProbeQueue]
    ) -> None:
        """A stale queued run of A is re-sent by A's janitor only, never by B's."""
        a, b = queues
        run_id = _submit(shared_store, snapshot_id, a)
        assert a.depth() == 1
        janitor_b = WorkerContext(store=shared_store, resend_after_ms=0, namespace=b.namespace)
        # Given: the run is stale (resend_after_ms=0), as after a wait that timed out.
        time.sleep(0.002)  # enqueued_ms must be strictly older than "now - 0"
        assert reap_runs(janitor_b, b.enqueue) == {"requeued": 0, "abandoned": 0, "resent": 0}
        assert (b.depth(), a.depth()) == (0, 1)
        janitor_a = WorkerContext(store=shared_store, resend_after_ms=0, namespace=a.namespace)
        assert reap_runs(janitor_a, a.enqueue)["resent"] == 1
        assert (b.depth(), a.depth()) == (0, 2)
        assert _run_row(shared_store, run_id).state == "queued"

    def test_janitor_of_another_namespace_neither_requeues_nor_abandons(
        self, shared_store: Store, snapshot_id: str, queues: tuple[ProbeQueue, ProbeQueue]
    ) -> None:
        """A run of A whose worker vanished is left to A's janitor: B's does not touch it."""
        a, b = queues
        run_id = _submit(shared_store, snapshot_id, a)
        claim_run(shared_store, run_id, "vanished-worker", 1, namespace=a.namespace)
        while not any(r.run_id == run_id for r in expired_runs(shared_store, a.namespace)):
            time.sleep(0.005)
        assert expired_runs(shared_store, b.namespace) == []
        janitor_b = WorkerContext(store=shared_store, max_attempts=1, namespace=b.namespace)
        assert reap_runs(janitor_b, b.enqueue) == {"requeued": 0, "abandoned": 0, "resent": 0}
        row = _run_row(shared_store, run_id)
        assert (row.state, row.lease_owner, b.depth()) == ("running", "vanished-worker", 0)
        janitor_a = WorkerContext(store=shared_store, max_attempts=3, namespace=a.namespace)
        assert reap_runs(janitor_a, a.enqueue)["requeued"] == 1


class TestWorker:
    def test_worker_of_another_namespace_refuses_the_run(
        self, shared_store: Store, snapshot_id: str, queues: tuple[ProbeQueue, ProbeQueue]
    ) -> None:
        """A's run delivered to B's worker is refused without executing: still queued,
        no attempt counted, no receipt; A's worker may still take it."""
        a, b = queues
        run_id = _submit(shared_store, snapshot_id, a)
        worker_b = WorkerContext(store=shared_store, namespace=b.namespace)
        assert execute_run(worker_b, run_id) == "other_namespace"
        row = _run_row(shared_store, run_id)
        assert (row.state, row.attempts, row.lease_owner) == ("queued", 0, None)
        assert _receipt_count(shared_store, run_id) == 0
        assert claim_run(shared_store, run_id, "worker-a", 60_000, namespace=a.namespace).why == (
            "claimed"
        )

    def test_running_worker_of_another_namespace_refuses_a_delivered_message(
        self,
        shared_store: Store,
        snapshot_id: str,
        queues: tuple[ProbeQueue, ProbeQueue],
        start_farm: Callable[..., Farm],
        other_namespace: str,
    ) -> None:
        """A real worker on namespace B that receives (through Redis) a message for a run
        of namespace A, and whose janitor re-sends at once, never executes it."""
        a, b = queues
        farm = start_farm(
            processes=1, threads=1, PROBE_REDIS_NAMESPACE=other_namespace, PROBE_RESEND_AFTER_MS="0"
        )
        run_id = _submit(shared_store, snapshot_id, a)
        b.enqueue([run_id])  # the stray message: A's run on B's queue
        deadline = time.monotonic() + 120
        while f"run {run_id}: other_namespace" not in farm.log.read_text(errors="replace"):
            assert time.monotonic() < deadline, farm.log.read_text(errors="replace")
            time.sleep(0.2)
        row = _run_row(shared_store, run_id)
        assert (row.state, row.attempts, row.namespace) == ("queued", 0, a.namespace)
        assert _receipt_count(shared_store, run_id) == 0
        assert a.depth() == 1  # A's own message still waits for A's workers


def test_timed_out_run_is_not_executed_by_another_namespace(
    shared_store: Store, snapshot_id: str, queues: tuple[ProbeQueue, ProbeQueue]
) -> None:
    """The reported bug: a queued `run` on A times out with no worker; B's janitor and
    worker then pass, and the run is never executed."""
    a, b = queues
    plan_id = service.probe_plan(shared_store, shell_plan(snapshot_id, "exit 0", "late")).plan_id
    with pytest.raises(InfrastructureError, match="cancelled"):
        service.probe_run_queued(shared_store, a, plan_id, POLICY_ID, timeout_s=0.5)
    with shared_store.reading() as conn:
        run_id = conn.execute(select(runs.c.run_id).where(runs.c.plan_id == plan_id)).scalar_one()
    ctx_b = WorkerContext(store=shared_store, resend_after_ms=0, namespace=b.namespace)
    assert reap_runs(ctx_b, b.enqueue)["resent"] == 0
    assert execute_run(ctx_b, run_id) == "other_namespace"
    row = _run_row(shared_store, run_id)
    assert (row.state, row.reason, _receipt_count(shared_store, run_id)) == (
        "done",
        "cancelled",
        0,
    )


def test_resume_refuses_a_batch_of_another_namespace(
    shared_store: Store, snapshot_id: str, queues: tuple[ProbeQueue, ProbeQueue]
) -> None:
    """`submit --resume` on namespace B refuses A's batch, naming A; on A it re-sends."""
    a, b = queues
    plan = parse_plan(shell_plan(snapshot_id, "exit 0", "resume"))
    batch_id = submit_plans(shared_store, InlineQueue(read_settings()), [plan], POLICY_ID).batch_id
    with shared_store.transaction() as conn:  # as if submitted on A while Redis was down
        conn.execute(runs.update().where(runs.c.batch_id == batch_id).values(namespace=a.namespace))
    with pytest.raises(InvalidInput, match=f"PROBE_REDIS_NAMESPACE={a.namespace}"):
        resume_batch(shared_store, b, batch_id)
    assert b.depth() == 0
    assert resume_batch(shared_store, a, batch_id) == 1
    assert a.depth() == 1


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_rows_older_than_the_migration_get_the_default_namespace(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """0007_run_namespace gives runs written before it the default namespace, byte-probe."""
    if backend == "sqlite":
        url = f"sqlite+pysqlite:///{tmp_path / 'old.db'}"
    else:
        url = request.getfixturevalue("pg_url")
    engine = create_store_engine(url)
    config = _config()
    with engine.begin() as conn:  # Given: a store at the revision before, holding a run
        config.attributes["connection"] = conn
        command.upgrade(config, "0006_signatures")
        conn.execute(
            text(
                "INSERT INTO runs (run_id, batch_id, seq, plan_id, policy_id, state, attempts,"
                " submitted_ms) VALUES ('r1', 'b1', 0, 'p', 'pol', 'queued', 0, 1)"
            )
        )
    upgrade_to_head(engine)
    store = Store(engine, root=tmp_path, url=url)
    try:
        assert _run_row(store, "r1").namespace == "byte-probe"
        janitor = WorkerContext(store=store, resend_after_ms=0, namespace="byte-probe")
        sent: list[str] = []
        assert reap_runs(janitor, lambda ids: sent.extend(ids) or len(ids))["resent"] == 1
        assert sent == ["r1"]
    finally:
        store.close()
