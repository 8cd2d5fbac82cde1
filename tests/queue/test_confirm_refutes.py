"""Routing a refutation's confirmation through the queue (docs/ARCHITECTURE.md,
"Confirming a refutation"): the store side, and two workers in this process whose probes
the stub sandbox answers (the farm tests run real worker processes and real probes)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from probe_service.plans import load_receipt, parse_plan
from probe_service.plans.confirm import ReceiptDraft
from probe_service.plans.receipt_model import parse_committed, parse_operational
from probe_service.queue import InlineQueue, WorkerContext, execute_run, submit_plans
from probe_service.queue.confirmations import pending_confirmation, requeue_for_confirmation
from probe_service.queue.execute import CONFIRM_ELSEWHERE_DELAY_MS
from probe_service.queue.heartbeats import another_worker_alive, note_alive, note_gone
from probe_service.queue.runs import cancel_run, claim_run, create_runs, finish_run
from probe_service.queue.tables import (
    DEFAULT_NAMESPACE,
    pending_confirmations,
    worker_heartbeats,
)
from probe_service.settings import read_settings
from probe_service.store import Store

from ..receipt_fields import committed_fields
from ..stubsandbox import Canned, StubSandbox
from .conftest import POLICY_ID, shell_plan
from .test_namespaces import _receipt_count, _run_row

DRAFT = ReceiptDraft(
    parse_committed({**committed_fields(), "outcome": "refutes"}, "test"),
    parse_operational({"worker": "a:1"}, "test"),
)


def refuting_plan(snapshot_id: str, script: str = "exit 1") -> dict[str, Any]:
    """A plan whose failure refutes: ``exit 1`` refutes on every execution."""
    return {**shell_plan(snapshot_id, script, f"refutes: {script}"), "failure_refutes": True}


#: Answers every execution as ``exit 1`` does: a refutation, every time.
REFUTING = Canned(exit_code=1)


#: The queue the workers of these tests consume and send runs back to.
QUEUE = "probes"


class Sent:
    """A queue stand-in recording what a worker sent again (run id, delay); the tests
    deliver messages themselves by calling ``execute_run``."""

    queue_name = QUEUE

    def __init__(self) -> None:
        self.messages: list[tuple[str, int]] = []

    def enqueue(self, run_ids: Sequence[str], delay_ms: int = 0) -> int:
        self.messages.extend((run_id, delay_ms) for run_id in run_ids)
        return len(run_ids)


class TestStore:
    def test_a_run_waiting_for_its_confirmation_is_one_queued_run(self, any_store: Store) -> None:
        """Handing off puts the run back to queued (attempts from zero) with its draft."""
        (run_id,) = create_runs(any_store, "b1", [("p" * 64, POLICY_ID)])
        claim_run(any_store, run_id, "a:1", 60_000)
        assert requeue_for_confirmation(any_store, run_id, "a:1", DRAFT) is True
        row = _run_row(any_store, run_id)
        assert (row.state, row.attempts, row.lease_owner) == ("queued", 0, None)
        pending = pending_confirmation(any_store, run_id)
        assert pending is not None
        assert (pending.first_worker, pending.draft) == ("a:1", DRAFT)

    def test_a_worker_without_the_lease_hands_off_nothing(self, any_store: Store) -> None:
        """A worker whose lease went elsewhere writes nothing: the run stays the other's."""
        (run_id,) = create_runs(any_store, "b1", [("p" * 64, POLICY_ID)])
        claim_run(any_store, run_id, "b:2", 60_000)
        assert requeue_for_confirmation(any_store, run_id, "a:1", DRAFT) is False
        assert (_run_row(any_store, run_id).state, _run_row(any_store, run_id).lease_owner) == (
            "running",
            "b:2",
        )
        assert pending_confirmation(any_store, run_id) is None

    def test_finishing_the_run_drops_its_pending_confirmation(self, any_store: Store) -> None:
        """Whatever finishes the run (here the janitor's abandon path) leaves nothing to confirm."""
        (run_id,) = create_runs(any_store, "b1", [("p" * 64, POLICY_ID)])
        claim_run(any_store, run_id, "a:1", 60_000)
        requeue_for_confirmation(any_store, run_id, "a:1", DRAFT)
        finish_run(
            any_store,
            run_id,
            outcome="inconclusive",
            reason="worker_lost",
            receipt_sha256=None,
            action_key=None,
        )
        assert pending_confirmation(any_store, run_id) is None

    def test_cancel_leaves_a_run_waiting_for_its_confirmation_alone(self, any_store: Store) -> None:
        """A run a worker already took is not cancellable while queued again to confirm."""
        (run_id,) = create_runs(any_store, "b1", [("p" * 64, POLICY_ID)])
        claim_run(any_store, run_id, "a:1", 60_000)
        requeue_for_confirmation(any_store, run_id, "a:1", DRAFT)
        assert cancel_run(any_store, run_id) == "running"
        assert _run_row(any_store, run_id).state == "queued"

    def test_an_unreadable_stored_draft_is_never_confirmed(self, any_store: Store) -> None:
        """A stored draft that is not one reads as nothing to confirm: the run runs anew."""
        (run_id,) = create_runs(any_store, "b1", [("p" * 64, POLICY_ID)])
        with any_store.transaction() as conn:
            row = {"run_id": run_id, "first_worker": "a:1", "draft": "{", "created_ms": 0}
            conn.execute(pending_confirmations.insert().values(**row))
        assert pending_confirmation(any_store, run_id) is None


class TestHeartbeats:
    def test_another_live_worker_of_the_namespace_and_queue_counts(self, any_store: Store) -> None:
        """Only another owner, of the same namespace and queue, seen within the window,
        counts: a worker that never receives the run cannot confirm it."""

        def alive() -> bool:
            return another_worker_alive(any_store, "a:1", DEFAULT_NAMESPACE, QUEUE, 60_000)

        note_alive(any_store, "a:1", DEFAULT_NAMESPACE, [QUEUE])
        assert alive() is False
        note_alive(any_store, "c:3", "elsewhere", [QUEUE])
        note_alive(any_store, "d:4", DEFAULT_NAMESPACE, ["gpu"])
        assert alive() is False
        note_alive(any_store, "b:2", DEFAULT_NAMESPACE, ["gpu", QUEUE])
        note_alive(any_store, "b:2", DEFAULT_NAMESPACE, ["gpu", QUEUE])  # each tick again
        assert alive() is True
        note_gone(any_store, "b:2")
        assert alive() is False

    def test_a_silent_worker_stops_counting(self, any_store: Store) -> None:
        """A worker not seen within the window (killed, never said goodbye) is not alive."""
        note_alive(any_store, "b:2", DEFAULT_NAMESPACE, [QUEUE])
        assert another_worker_alive(any_store, "a:1", DEFAULT_NAMESPACE, QUEUE, -1) is False

    def test_long_silent_workers_are_forgotten(self, any_store: Store) -> None:
        """Notes of workers silent for an hour are removed by the next note."""
        with any_store.transaction() as conn:
            row = {"owner": "gone:9", "queue": QUEUE, "namespace": DEFAULT_NAMESPACE, "seen_ms": 0}
            conn.execute(worker_heartbeats.insert().values(**row))
        note_alive(any_store, "a:1", DEFAULT_NAMESPACE, [QUEUE])
        with any_store.reading() as conn:
            owners = conn.execute(select(worker_heartbeats.c.owner)).scalars().all()
        assert owners == ["a:1"]


@pytest.fixture
def submit_refuting(shared_store: Store, snapshot_id: str, policy_file: Path) -> Any:
    """Submit one refuting plan (no broker: the tests deliver it); return its run id."""

    def submit(script: str = "exit 1") -> str:
        plan = parse_plan(refuting_plan(snapshot_id, script))
        return submit_plans(shared_store, InlineQueue(read_settings()), [plan], POLICY_ID).run_ids[
            0
        ]

    return submit


class TestTwoWorkersInProcess:
    def test_the_first_worker_hands_off_and_another_confirms(
        self, shared_store: Store, submit_refuting: Any
    ) -> None:
        """A refutes and hands the run back to the queue; receiving it again, A puts it
        aside; B confirms it. One run, one receipt, confirmed on another worker."""
        sent_a, sent_b = Sent(), Sent()
        sandbox = StubSandbox(REFUTING)
        a = WorkerContext(store=shared_store, backend=sandbox, owner="host:a", queue=sent_a)
        b = WorkerContext(store=shared_store, backend=sandbox, owner="host:b", queue=sent_b)
        note_alive(shared_store, "host:a", DEFAULT_NAMESPACE, [QUEUE])
        note_alive(shared_store, "host:b", DEFAULT_NAMESPACE, [QUEUE])
        run_id = submit_refuting()
        assert execute_run(a, run_id) == "confirm_elsewhere"
        assert sent_a.messages == [(run_id, 0)]
        assert (_run_row(shared_store, run_id).state, _receipt_count(shared_store, run_id)) == (
            "queued",
            0,
        )
        assert execute_run(a, run_id) == "confirm_elsewhere"  # A's own refutation: not A's
        assert sent_a.messages[-1] == (run_id, CONFIRM_ELSEWHERE_DELAY_MS)
        assert _run_row(shared_store, run_id).attempts == 0  # put aside, never claimed
        assert execute_run(b, run_id) == "refutes"
        row = _run_row(shared_store, run_id)
        assert (row.state, row.outcome, row.reason) == ("done", "refutes", "oracle_failed")
        assert _receipt_count(shared_store, run_id) == 1
        assert pending_confirmation(shared_store, run_id) is None
        receipt = load_receipt(shared_store, run_id)
        confirmation = receipt.committed.to_json()["confirmation"]
        assert (confirmation["state"], confirmation["on"]) == ("confirmed", "another_worker")
        assert receipt.operational.to_json()["worker"] == "host:a"
        assert receipt.operational.to_json()["confirmation"]["worker"] == "host:b"
        assert sent_b.messages == []
        assert len(sandbox.executions) == 2  # A's refutation, B's confirmation

    def test_alone_the_worker_confirms_its_own_refutation_at_once(
        self, shared_store: Store, submit_refuting: Any
    ) -> None:
        """No other live worker: the refuting worker executes again itself, in the same claim."""
        sent = Sent()
        sandbox = StubSandbox(REFUTING)
        a = WorkerContext(store=shared_store, backend=sandbox, owner="host:a", queue=sent)
        note_alive(shared_store, "host:a", DEFAULT_NAMESPACE, [QUEUE])
        run_id = submit_refuting()
        assert execute_run(a, run_id) == "refutes"
        assert sent.messages == []
        receipt = load_receipt(shared_store, run_id)
        confirmation = receipt.committed.to_json()["confirmation"]
        assert (confirmation["state"], confirmation["on"]) == ("confirmed", "same_worker")
        assert receipt.operational.to_json()["confirmation"]["worker"] == "host:a"
        assert len(sandbox.executions) == 2
