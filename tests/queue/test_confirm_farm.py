"""A refutation's confirmation on a real farm: worker processes, Redis, PostgreSQL and the
real sandbox (docs/ARCHITECTURE.md, "Confirming a refutation").

With two workers the confirmation runs on the other one; with one, on the same one. A
worker SIGKILLed between a refutation and its confirmation loses nothing and duplicates
nothing, and the farm's views count one run per submitted run.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import psutil
import pytest

from probe_service.plans import load_receipt, parse_plan
from probe_service.queue import ProbeQueue, batch_counts, batch_results, submit_plans, wait_batch
from probe_service.queue.confirmations import pending_confirmation
from probe_service.queue.farm import farm_stats
from probe_service.queue.listing import RunFilters, list_runs
from probe_service.store import Store

from .conftest import POLICY_ID, Farm, wait_done
from .test_confirm_refutes import refuting_plan
from .test_namespaces import _run_row
from .test_reliability import _receipts_per_run

#: Bound for an event the test waits for; a hang fails the test instead of the CI run.
EVENT_DEADLINE_S = 240.0


@dataclass(frozen=True)
class FarmBatch:
    """A farm and one batch of refuting runs submitted to it."""

    farm: Farm
    batch_id: str
    total: int


@pytest.fixture
def refuting_batch(
    shared_store: Store,
    snapshot_id: str,
    start_farm: Callable[..., Farm],
    redis_url: str,
    redis_namespace: str,
) -> Iterator[Callable[..., FarmBatch]]:
    """Start a farm, then submit one refuting run per script to it."""
    queues: list[ProbeQueue] = []

    def submit(processes: int, threads: int, *scripts: str, **env: str) -> FarmBatch:
        farm = start_farm(processes=processes, threads=threads, **env)
        queues.append(ProbeQueue(redis_url, namespace=redis_namespace))
        plans = [parse_plan(refuting_plan(snapshot_id, script)) for script in scripts]
        submitted = submit_plans(shared_store, queues[-1], plans, POLICY_ID)
        return FarmBatch(farm, submitted.batch_id, len(submitted.run_ids))

    yield submit
    for queue in queues:
        queue.close()


def _owners(farm: Farm) -> set[str]:
    """The owner names (``host:pid``) of the farm's live worker processes."""
    return {f"{socket.gethostname()}:{worker.pid}" for worker in farm.workers()}


def _confirmations(store: Store, batch_id: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(committed confirmation, operational part) of each run's receipt."""
    found = []
    for run in batch_results(store, batch_id):
        assert run.receipt_sha256 is not None
        receipt = load_receipt(store, run.receipt_sha256)
        found.append((receipt.committed.to_json()["confirmation"], receipt.operational.to_json()))
    return found


def _wait_for(what: str, condition: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + EVENT_DEADLINE_S
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    pytest.fail(f"never happened within {EVENT_DEADLINE_S}s: {what}")


def _kill_owner(owner: str) -> None:
    """SIGKILL the worker process named ``host:pid``."""
    psutil.Process(int(owner.rsplit(":", 1)[1])).kill()


def _assert_counted_once(store: Store, batch_id: str, total: int) -> None:
    """Every view of the farm counts each submitted run once, as refuted."""
    counts = wait_batch(store, batch_id, lambda _: None, timeout_s=EVENT_DEADLINE_S)
    assert counts == {"done": total, "refutes": total}
    assert batch_counts(store, batch_id) == counts
    stats = farm_stats(store, window_ms=3_600_000, buckets=60)
    assert stats.outcomes == {"refutes": total}
    assert stats.by_state.get("queued", 0) == stats.by_state.get("running", 0) == 0
    page = list_runs(store, RunFilters(batch_id=batch_id), limit=100)
    assert len(page.runs) == total
    per_run = _receipts_per_run(store, batch_id)
    assert len(per_run) == total
    assert set(per_run.values()) == {1}


class TestRouting:
    def test_two_workers_confirm_on_the_other_worker(
        self, shared_store: Store, refuting_batch: Callable[..., FarmBatch]
    ) -> None:
        """On a two-worker farm every refutation is confirmed by the worker that did not
        refute first, and each run is counted once."""
        batch = refuting_batch(2, 1, "exit 1 # a", "exit 1 # b")
        owners = _owners(batch.farm)
        wait_done(shared_store, batch.batch_id, batch.total)
        for confirmation, operational in _confirmations(shared_store, batch.batch_id):
            assert (confirmation["state"], confirmation["on"]) == ("confirmed", "another_worker")
            first, second = operational["worker"], operational["confirmation"]["worker"]
            assert first != second
            assert {first, second} == owners
        _assert_counted_once(shared_store, batch.batch_id, batch.total)

    def test_one_worker_confirms_on_itself(
        self, shared_store: Store, refuting_batch: Callable[..., FarmBatch]
    ) -> None:
        """Alone on the farm, the worker that refuted confirms its refutation itself."""
        batch = refuting_batch(1, 2, "exit 1 # solo")
        (owner,) = _owners(batch.farm)
        wait_done(shared_store, batch.batch_id, batch.total)
        ((confirmation, operational),) = _confirmations(shared_store, batch.batch_id)
        assert (confirmation["state"], confirmation["on"]) == ("confirmed", "same_worker")
        assert operational["worker"] == operational["confirmation"]["worker"] == owner
        _assert_counted_once(shared_store, batch.batch_id, batch.total)


class TestWorkerKills:
    def test_sigkills_between_refutation_and_confirmation_lose_and_duplicate_nothing(
        self, shared_store: Store, refuting_batch: Callable[..., FarmBatch]
    ) -> None:
        """SIGKILL the worker that refuted once it handed the run off, then the worker
        running the confirmation mid-probe: the run is still confirmed once, with one
        receipt, and counted once everywhere."""
        # The killed workers' prefetched messages come back through the janitor's re-send.
        batch = refuting_batch(2, 1, "sleep 3; exit 1", PROBE_RESEND_AFTER_MS="3000")
        (run_id,) = [run.run_id for run in batch_results(shared_store, batch.batch_id)]
        pending = _wait_for("hand-off", lambda: pending_confirmation(shared_store, run_id))
        _kill_owner(pending.first_worker)

        def confirming_owner() -> str | None:
            row = _run_row(shared_store, run_id)
            mid_probe = row.state == "running" and row.lease_owner != pending.first_worker
            return str(row.lease_owner) if mid_probe else None

        confirming = _wait_for("confirmation under way", confirming_owner)
        _kill_owner(confirming)
        wait_done(shared_store, batch.batch_id, batch.total)
        ((confirmation, operational),) = _confirmations(shared_store, batch.batch_id)
        assert confirmation["state"] == "confirmed"
        assert operational["worker"] == pending.first_worker
        assert operational["confirmation"]["worker"] not in (pending.first_worker, confirming)
        assert pending_confirmation(shared_store, run_id) is None
        _assert_counted_once(shared_store, batch.batch_id, batch.total)
