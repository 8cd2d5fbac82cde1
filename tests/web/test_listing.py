"""The runs list on both backends: the trigger of 0008_web_indexes sorts receipts into
queued runs and runs in process; pages merge both; the side table is insert-only."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import delete, update
from sqlalchemy.exc import DBAPIError

from probe_service.plans import Receipt
from probe_service.plans.persist import save_receipt
from probe_service.queue.farm import farm_stats
from probe_service.queue.listing import RunFilters, inprocess_runs, list_runs
from probe_service.queue.runs import cancel_run, create_runs, finish_run
from probe_service.store import Store

from ..receipt_fields import committed_fields, receipt_of

PLAN = "a" * 64
SNAP = "b" * 64


def _receipt(outcome: str, reason: str) -> Receipt:
    """A receipt of PLAN on SNAP; each call a new one (its run id differs)."""
    committed = {
        **committed_fields(),
        "plan_id": PLAN,
        "action_key": "c" * 64,
        "outcome": outcome,
        "reason": reason,
        "policy_id": "pol",
        "snapshot_id": SNAP,
        "elapsed_us": uuid.uuid4().int % 1_000_000,
    }
    return receipt_of(committed, {"run_id": uuid.uuid4().hex})


def test_receipts_are_sorted_into_queued_and_in_process(any_store: Store) -> None:
    """A receipt of a queued run stays with its run; one without a run row is in process."""
    (queued,) = create_runs(any_store, uuid.uuid4().hex, [(PLAN, "pol")])
    receipt = _receipt("refutes", "oracle_failed")
    save_receipt(any_store, queued, receipt, reusable=True)
    finish_run(
        any_store,
        queued,
        outcome="refutes",
        reason="oracle_failed",
        receipt_sha256=receipt.receipt_sha256,
        action_key="c" * 64,
    )
    alone = uuid.uuid4().hex
    save_receipt(any_store, alone, _receipt("supports", "oracle_passed"), reusable=True)
    page = list_runs(any_store, RunFilters(), limit=10)
    assert {(r.run_id, r.source) for r in page.runs} == {(queued, "queue"), (alone, "process")}
    by_snapshot = list_runs(any_store, RunFilters(snapshot_id=SNAP, policy_id="pol"), limit=10)
    assert [r.run_id for r in by_snapshot.runs] == [alone]  # the queued run's plan is not stored
    assert list_runs(any_store, RunFilters(outcome="supports"), limit=10).runs[0].run_id == alone


def test_the_in_process_table_is_insert_only(any_store: Store) -> None:
    """UPDATE and DELETE of inprocess_runs are refused by the database."""
    save_receipt(any_store, uuid.uuid4().hex, _receipt("supports", "oracle_passed"), reusable=True)
    for statement in (update(inprocess_runs).values(outcome="refutes"), delete(inprocess_runs)):
        with (
            pytest.raises(DBAPIError, match="immutable"),
            any_store.engine.begin() as conn,
        ):
            conn.execute(statement)
    assert list_runs(any_store, RunFilters(outcome="supports"), limit=5).runs


def test_pages_merge_both_kinds_without_loss(any_store: Store) -> None:
    """Interleaved queued and in-process runs come out once each across pages of two."""
    expected = set()
    for _ in range(3):
        expected |= set(create_runs(any_store, uuid.uuid4().hex, [(PLAN, "pol")]))
        alone = uuid.uuid4().hex
        save_receipt(any_store, alone, _receipt("supports", "oracle_passed"), reusable=True)
        expected.add(alone)
    seen, cursor = [], None
    while True:
        page = list_runs(any_store, RunFilters(), limit=2, cursor=cursor)
        seen += [r.run_id for r in page.runs]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert sorted(seen) == sorted(expected)
    assert len(seen) == len(set(seen))


def test_finished_runs_are_counted_once_per_minute(any_store: Store) -> None:
    """Finishing a run counts it once (a second finish changes nothing); a cancel counts
    as inconclusive/cancelled; queued runs are counted by state, not as finished."""
    first, second, _waiting = create_runs(any_store, uuid.uuid4().hex, [(PLAN, "pol")] * 3)
    for _ in range(2):
        finish_run(
            any_store,
            first,
            outcome="supports",
            reason="oracle_passed",
            receipt_sha256=None,
            action_key=None,
        )
    assert cancel_run(any_store, second) == "queued"
    stats = farm_stats(any_store, window_ms=3_600_000, buckets=6)
    assert stats.outcomes == {"inconclusive": 1, "supports": 1}
    assert stats.reasons == {"cancelled": 1, "oracle_passed": 1}
    assert stats.by_state == {"queued": 1, "done in window": 2}
    assert stats.queue_depth == 1
    assert sum(b.finished for b in stats.buckets) == 2
    assert stats.buckets[-1].latency_max_ms is not None


def test_the_counting_triggers_exist_at_head(sqlite_store: Store) -> None:
    """A later migration that rebuilds ``runs`` or ``receipts`` must recreate them."""
    from sqlalchemy import text

    with sqlite_store.reading() as conn:
        names = set(
            conn.execute(text("SELECT name FROM sqlite_master WHERE type='trigger'")).scalars()
        )
    assert {
        "runs_count_finished_update",
        "runs_count_finished_insert",
        "receipts_note_inprocess_run",
        "plans_note_keys",
    } <= names


def test_runs_in_process_alone_fill_the_farm_statistics(any_store: Store) -> None:
    """A store with runs in process only (``byte-probe demo``'s) has outcomes, reasons and
    throughput on the farm page, and no latency (that is the queue's)."""
    for outcome, reason in (("supports", "oracle_passed"), ("refutes", "oracle_failed")):
        save_receipt(any_store, uuid.uuid4().hex, _receipt(outcome, reason), reusable=True)
    stats = farm_stats(any_store, window_ms=3_600_000, buckets=6)
    assert stats.outcomes == {"refutes": 1, "supports": 1}
    assert stats.reasons == {"oracle_failed": 1, "oracle_passed": 1}
    assert stats.by_state == {"done in window": 2}
    assert (stats.in_process_in_window, stats.buckets[-1].in_process) == (2, 2)
    assert all(b.latency_avg_ms is None for b in stats.buckets)
    assert stats.queue_depth == 0
