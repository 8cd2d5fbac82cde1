"""Reliability with real Redis, PostgreSQL, worker processes and the real sandbox."""

from __future__ import annotations

import random
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
from sqlalchemy import func, select, text

from probe_service.errors import BrokerUnavailable
from probe_service.plans import parse_receipt_json, verify_receipt
from probe_service.plans.tables import receipts
from probe_service.queue import ProbeQueue, read_plans_file, resume_batch, submit_plans
from probe_service.queue.tables import runs
from probe_service.store import Store

from .conftest import POLICY_ID, Farm, shell_plan, wait_done


def _receipts_per_run(store: Store, batch_id: str) -> dict[str, int]:
    with store.reading() as conn:
        rows = conn.execute(
            select(runs.c.run_id, func.count(receipts.c.receipt_sha256))
            .outerjoin(receipts, receipts.c.run_id == runs.c.run_id)
            .where(runs.c.batch_id == batch_id)
            .group_by(runs.c.run_id)
        ).all()
    return dict(rows)


def _submit(
    store: Store, queue: ProbeQueue | None, plans: list[dict[str, object]], tmp: Path
) -> tuple[str, int]:
    path = tmp / "plans.jsonl"
    path.write_text("\n".join(__import__("json").dumps(p) for p in plans))
    items, _ = read_plans_file(path, POLICY_ID)
    result = submit_plans(store, queue, items, POLICY_ID)
    return result.batch_id, len(result.run_ids)


class TestWorkerKills:
    # The batch's own bound is a stall (wait_done); on a loaded machine 200 sandboxed runs may
    # take longer than the suite's default per-test timeout while still making progress.
    @pytest.mark.timeout(1200)
    def test_sigkilled_workers_lose_and_duplicate_nothing(
        self,
        shared_store: Store,
        snapshot_id: str,
        start_farm: Callable[..., Farm],
        redis_url: str,
        redis_namespace: str,
        tmp_path: Path,
    ) -> None:
        """200 runs over 2 processes with 3 SIGKILLs: every run ends with exactly one receipt."""
        # A killed worker's prefetched messages (never claimed, so no lease expires) come
        # back only through the janitor's re-send; its default of five minutes would
        # outlast the test whenever a kill lands on a worker holding one.
        farm = start_farm(processes=2, threads=2, PROBE_RESEND_AFTER_MS="10000")
        queue = ProbeQueue(redis_url, namespace=redis_namespace)
        plans = [shell_plan(snapshot_id, f"exit 0 # {i}", f"run {i}") for i in range(200)]
        batch_id, total = _submit(shared_store, queue, plans, tmp_path)
        rng = random.Random(1)
        kill_at = sorted(rng.sample(range(10, 150), 3))
        kills: list[int] = []

        def maybe_kill() -> None:
            done = wait_counts(shared_store, batch_id)
            if not kill_at or done < kill_at[0]:
                return
            # The victim holds a lease now, so its kill is a counted attempt (a worker still
            # starting, or between messages, would be killed without one).
            holding = leased_pids(shared_store, batch_id)
            candidates = [w for w in farm.workers() if w.pid in holding]
            if not candidates:
                return  # asked again on the next tick
            kill_at.pop(0)
            victim = rng.choice(candidates)
            victim.send_signal(signal.SIGKILL)
            kills.append(victim.pid)

        wait_done(shared_store, batch_id, total, tick=maybe_kill)
        per_run = _receipts_per_run(shared_store, batch_id)
        assert len(kills) == 3
        assert len(per_run) == 200
        assert set(per_run.values()) == {1}
        with shared_store.reading() as conn:
            attempts = conn.execute(
                select(func.max(runs.c.attempts)).where(runs.c.batch_id == batch_id)
            ).scalar()
        assert attempts is not None
        assert attempts >= 2  # killed attempts are counted, then the run completed
        queue.close()


class TestRedisRestart:
    def test_restart_mid_submission_loses_no_run(
        self,
        shared_store: Store,
        snapshot_id: str,
        start_farm: Callable[..., Farm],
        redis_namespace: str,
        tmp_path: Path,
    ) -> None:
        """A Redis restart mid-enqueue fails with a resume command; resuming loses no run."""
        port = 16379 + random.Random().randrange(1000)
        url = f"redis://127.0.0.1:{port}/0"
        argv = [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ]
        server = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
        _wait_redis(url)

        class KillingQueue(ProbeQueue):
            """Kills the real Redis server after 20 messages (test instrumentation)."""

            def enqueue(self, run_ids: object) -> int:
                sent = super().enqueue(list(run_ids)[:20])  # type: ignore[call-overload]
                server.kill()
                server.wait()
                return sent + super().enqueue(list(run_ids)[20:])  # type: ignore[call-overload]

        queue = KillingQueue(url, namespace=redis_namespace)
        plans = [shell_plan(snapshot_id, f"exit 0 # r{i}", f"restart {i}") for i in range(60)]
        with pytest.raises(
            BrokerUnavailable, match=r"Resume with: byte-probe submit --resume [0-9a-f]{32}"
        ):
            _submit(shared_store, queue, plans, tmp_path)
        with shared_store.reading() as conn:
            batch_id = conn.execute(select(runs.c.batch_id).limit(1)).scalar_one()
            stored = conn.execute(select(func.count()).select_from(runs)).scalar_one()
        assert stored == 60  # every run was persisted before any message was sent
        server = subprocess.Popen(argv, stdout=subprocess.DEVNULL)  # back, and empty
        try:
            _wait_redis(url)
            start_farm(processes=1, threads=2, PROBE_REDIS_URL=url)
            plain = ProbeQueue(url, namespace=redis_namespace)
            assert resume_batch(shared_store, plain, batch_id) == 60
            wait_done(shared_store, batch_id, 60)
            assert set(_receipts_per_run(shared_store, batch_id).values()) == {1}
            plain.close()
        finally:
            server.kill()
            server.wait()


def _wait_redis(url: str) -> None:
    client = redis.Redis.from_url(url)
    deadline = time.monotonic() + 20
    while True:
        try:
            client.ping()
            client.close()
            return
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


class TestDatabaseDrop:
    def test_dropped_connections_are_retried_without_partial_receipts(
        self,
        shared_store: Store,
        snapshot_id: str,
        start_farm: Callable[..., Farm],
        redis_url: str,
        redis_namespace: str,
        pg_url: str,
        tmp_path: Path,
    ) -> None:
        """PostgreSQL connections killed under the workers: runs finish, receipts whole."""
        app = f"byte-probe-{redis_namespace}"
        start_farm(processes=2, threads=2, PROBE_DATABASE_URL=f"{pg_url}&application_name={app}")
        queue = ProbeQueue(redis_url, namespace=redis_namespace)
        plans = [shell_plan(snapshot_id, f"exit 0 # d{i}", f"drop {i}") for i in range(40)]
        batch_id, total = _submit(shared_store, queue, plans, tmp_path)
        drops: list[int] = []

        def drop_connections() -> None:
            done = wait_counts(shared_store, batch_id)
            if len(drops) < 3 and done >= 8 * (len(drops) + 1):
                with shared_store.engine.connect() as conn:
                    killed = conn.execute(
                        text(
                            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                            "WHERE application_name = :app"
                        ),
                        {"app": app},
                    ).scalar_one()
                    conn.commit()
                drops.append(int(killed))

        wait_done(shared_store, batch_id, total, tick=drop_connections)
        assert len(drops) == 3
        assert sum(drops) > 0
        assert set(_receipts_per_run(shared_store, batch_id).values()) == {1}
        with shared_store.reading() as conn:
            bodies = conn.execute(select(receipts.c.body)).scalars().all()
        outcomes = []
        for body in bodies:
            receipt = parse_receipt_json(body)
            verify_receipt(receipt)
            committed, operational = receipt.committed, receipt.operational
            # The detail and launcher say why, should a run ever end otherwise.
            outcomes.append(
                (
                    committed.outcome,
                    committed.reason,
                    operational.detail,
                    operational.launcher,
                )
            )
        # A dropped connection is infrastructure: retried, never an inconclusive probe.
        assert {o[0] for o in outcomes} == {"supports"}, [x for x in outcomes if x[0] != "supports"]
        queue.close()


class TestCrashingProbe:
    def test_run_that_always_kills_its_worker_ends_worker_lost(
        self,
        shared_store: Store,
        snapshot_id: str,
        start_farm: Callable[..., Farm],
        redis_url: str,
        redis_namespace: str,
        tmp_path: Path,
    ) -> None:
        """A run whose worker dies on every attempt ends inconclusive/worker_lost, not a loop."""
        start_farm(processes=1, threads=1)
        queue = ProbeQueue(redis_url, namespace=redis_namespace)
        plans = [shell_plan(snapshot_id, "sleep 15", "crashes its worker")]
        batch_id, total = _submit(shared_store, queue, plans, tmp_path)
        killed: list[int] = []

        def kill_owner() -> None:
            # Stands in for a probe that crashes the worker process running it.
            with shared_store.reading() as conn:
                row = conn.execute(select(runs.c.state, runs.c.lease_owner, runs.c.attempts)).one()
            if row.state == "running" and row.lease_owner and row.attempts > len(killed):
                pid = int(row.lease_owner.rsplit(":", 1)[1])
                import os

                os.kill(pid, signal.SIGKILL)
                killed.append(pid)

        wait_done(shared_store, batch_id, total, tick=kill_owner)
        with shared_store.reading() as conn:
            row = conn.execute(select(runs)).one()
            receipt_rows = conn.execute(select(func.count()).select_from(receipts)).scalar_one()
        assert (row.outcome, row.reason) == ("inconclusive", "worker_lost")
        assert row.attempts == 3
        assert len(killed) == 3
        assert receipt_rows == 1
        queue.close()


def wait_counts(store: Store, batch_id: str) -> int:
    from probe_service.queue import batch_counts

    return batch_counts(store, batch_id).get("done", 0)


def leased_pids(store: Store, batch_id: str) -> set[int]:
    """The pids of the workers holding a lease on a run of the batch (owner ``host:pid``)."""
    with store.reading() as conn:
        owners = conn.execute(
            select(runs.c.lease_owner).where(runs.c.batch_id == batch_id, runs.c.state == "running")
        ).scalars()
        return {int(o.rsplit(":", 1)[1]) for o in owners if o and o.rsplit(":", 1)[1].isdigit()}
