"""Taking runs: one transaction leases a run with what running it needs, or many runs at
once (docs/ARCHITECTURE.md, "Lean store path")."""

from __future__ import annotations

from typing import Any

from sqlalchemy import event, update

from probe_service.plans import parse_plan
from probe_service.plans.persist import save_plan
from probe_service.queue import create_runs
from probe_service.queue.runs import claim_run, finish_run
from probe_service.queue.tables import DEFAULT_NAMESPACE, runs
from probe_service.queue.take import take_run, take_runs
from probe_service.store import Store

from .conftest import POLICY_ID, shell_plan

LEASE_MS = 60_000


class Transactions:
    """Counts the transactions and statements ``store`` runs while it is armed."""

    def __init__(self, store: Store) -> None:
        self.begun = 0
        self.statements = 0
        event.listen(store.engine, "begin", self._begin)
        event.listen(store.engine, "before_cursor_execute", self._statement)

    def _begin(self, _conn: Any) -> None:
        self.begun += 1

    def _statement(self, _conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if not statement.startswith("BEGIN"):  # SQLite's own BEGIN IMMEDIATE is not counted
            self.statements += 1


def _runs(store: Store, count: int) -> list[str]:
    plan = parse_plan(shell_plan("a" * 64, "exit 0", "take"))
    plan_id, _ = save_plan(store, plan)
    return create_runs(store, "batch-take", [(plan_id, POLICY_ID)] * count)


def test_take_brings_the_plan_in_the_same_transaction(any_store: Store) -> None:
    """One transaction leases the run and reads its plan body and reuse candidates."""
    (run_id,) = _runs(any_store, 1)
    counted = Transactions(any_store)
    taking = take_run(any_store, run_id, "worker-a", LEASE_MS)
    assert taking.taken is not None
    assert (taking.taken.run.attempts, taking.why) == (1, "claimed")
    assert taking.taken.plan_body is not None
    assert '"take"' in taking.taken.plan_body
    assert taking.taken.candidates == ()
    assert taking.taken.candidates_complete
    assert counted.begun == 1


def test_take_refuses_like_a_claim(any_store: Store) -> None:
    """A run leased elsewhere, done, or unknown is not taken, and says why."""
    leased, done = _runs(any_store, 2)
    claim_run(any_store, leased, "worker-b", LEASE_MS)
    finish_run(
        any_store, done, outcome="supports", reason="x", receipt_sha256=None, action_key=None
    )
    answers = [take_run(any_store, r, "worker-a", LEASE_MS).why for r in (leased, done, "nope")]
    assert answers == ["leased_elsewhere", "already_done", "unknown_run"]


def test_take_runs_leases_every_free_run_in_one_transaction(any_store: Store) -> None:
    """Five free runs, one leased elsewhere, one done, one expired: one transaction of
    three statements takes the six free ones, counting each one's attempt."""
    ids = _runs(any_store, 8)
    claim_run(any_store, ids[5], "worker-b", LEASE_MS)
    finish_run(
        any_store, ids[6], outcome="supports", reason="x", receipt_sha256=None, action_key=None
    )
    claim_run(any_store, ids[7], "worker-b", LEASE_MS)
    with any_store.transaction() as conn:  # worker-b stopped renewing this one
        conn.execute(update(runs).where(runs.c.run_id == ids[7]).values(lease_expires_ms=1))
    counted = Transactions(any_store)
    taken = take_runs(any_store, ids, "worker-a", LEASE_MS, namespace=DEFAULT_NAMESPACE)
    assert (counted.begun, counted.statements) == (1, 3)
    assert [t.run.run_id for t in taken] == [*ids[:5], ids[7]]
    assert [t.run.attempts for t in taken] == [1] * 5 + [2]
    assert all(t.plan_body is not None for t in taken)
    again = take_runs(any_store, ids, "worker-c", LEASE_MS, namespace=DEFAULT_NAMESPACE)
    assert again == []


def test_take_runs_leaves_another_namespace_alone(any_store: Store) -> None:
    """Runs of another queue namespace are never taken by this one's worker."""
    ids = _runs(any_store, 2)
    assert take_runs(any_store, ids, "worker-a", LEASE_MS, namespace="elsewhere") == []
    assert take_run(any_store, ids[0], "worker-a", LEASE_MS).why == "claimed"
