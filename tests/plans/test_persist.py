"""Persistence of plans and receipts: content-addressed, insert-only, written once."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from sqlalchemy import func, insert, select, text
from sqlalchemy.exc import DBAPIError

from probe_service.errors import Conflict, NotFound
from probe_service.plans import (
    Receipt,
    find_reusable_receipt,
    load_plan,
    load_receipt,
    parse_plan,
    plan_id_of,
    save_plan,
    save_receipt,
)
from probe_service.plans.tables import plans, receipts
from probe_service.store import Store, read_events, utc_now

from ..receipt_fields import committed_fields, operational_fields, receipt_of
from .conftest import plan_doc


def row_count(store: Store, table: Any) -> int:
    with store.reading() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


def event_kinds(store: Store) -> list[str]:
    with store.reading() as conn:
        return [event.kind for event in read_events(conn, 0, 100)]


def make_receipt(**committed: Any) -> Receipt:
    return receipt_of({**committed_fields(), **committed}, operational_fields())


class TestSavePlan:
    def test_same_content_twice_is_one_row(self, any_store: Store) -> None:
        """Saving the same content twice gives one id, created only the first time, one row."""
        first = save_plan(any_store, parse_plan(plan_doc()))
        second = save_plan(any_store, parse_plan(plan_doc()))
        assert first == (second[0], True)
        assert second[1] is False
        assert row_count(any_store, plans) == 1

    def test_same_content_in_another_layout_is_the_same_plan(self, any_store: Store) -> None:
        """The same plan sent with other key order and whitespace is not stored again."""
        doc = plan_doc()
        plan_id, _ = save_plan(any_store, parse_plan(doc))
        reordered = json.dumps(dict(reversed(list(doc.items()))), indent=3)
        assert save_plan(any_store, parse_plan(reordered)) == (plan_id, False)
        assert row_count(any_store, plans) == 1

    def test_one_event_per_new_plan(self, any_store: Store) -> None:
        """Only the first save appends a plan event."""
        save_plan(any_store, parse_plan(plan_doc()))
        save_plan(any_store, parse_plan(plan_doc()))
        assert event_kinds(any_store) == ["plan"]

    def test_load_returns_the_saved_plan(self, any_store: Store) -> None:
        """A saved plan loads back equal, under its content id."""
        plan = parse_plan(plan_doc(hypothesis="caf\u00e9"))
        plan_id, _ = save_plan(any_store, plan)
        assert plan_id == plan_id_of(plan)
        assert load_plan(any_store, plan_id) == plan

    def test_load_unknown_is_not_found(self, any_store: Store) -> None:
        """Loading an id that is not stored raises NotFound naming it."""
        with pytest.raises(NotFound, match="f" * 64):
            load_plan(any_store, "f" * 64)

    def test_forged_row_is_refused_on_load(self, any_store: Store) -> None:
        """A row whose content is not what its id names is refused, never returned."""
        honest = parse_plan(plan_doc())
        other = parse_plan(plan_doc(hypothesis="other"))
        with any_store.transaction() as conn:
            conn.execute(
                insert(plans).values(
                    plan_id=plan_id_of(honest),
                    body=json.dumps(other.canonical()),
                    created_at=utc_now(),
                )
            )
        with pytest.raises(Conflict):
            load_plan(any_store, plan_id_of(honest))

    def test_forged_row_is_refused_on_save(self, any_store: Store) -> None:
        """Saving a plan whose id already names other bytes raises Conflict."""
        honest = parse_plan(plan_doc())
        with any_store.transaction() as conn:
            conn.execute(
                insert(plans).values(plan_id=plan_id_of(honest), body="{}", created_at=utc_now())
            )
        with pytest.raises(Conflict):
            save_plan(any_store, honest)


class TestImmutableRows:
    def test_plan_row_cannot_be_updated(self, any_store: Store) -> None:
        """Raw SQL UPDATE of a stored plan is refused by the database."""
        plan_id, _ = save_plan(any_store, parse_plan(plan_doc()))
        with pytest.raises(DBAPIError, match="immutable"), any_store.engine.begin() as conn:
            conn.execute(text("UPDATE plans SET body = '{}'"))
        assert load_plan(any_store, plan_id) == parse_plan(plan_doc())

    def test_plan_row_cannot_be_deleted(self, any_store: Store) -> None:
        """Raw SQL DELETE of a stored plan is refused by the database."""
        save_plan(any_store, parse_plan(plan_doc()))
        with pytest.raises(DBAPIError, match="immutable"), any_store.engine.begin() as conn:
            conn.execute(text("DELETE FROM plans"))
        assert row_count(any_store, plans) == 1

    def test_receipt_row_cannot_be_updated(self, any_store: Store) -> None:
        """Raw SQL UPDATE of a stored receipt (even just its outcome) is refused."""
        save_receipt(any_store, "run-1", make_receipt(), reusable=True)
        with pytest.raises(DBAPIError, match="immutable"), any_store.engine.begin() as conn:
            conn.execute(text("UPDATE receipts SET outcome = 'refutes'"))
        assert load_receipt(any_store, "run-1").committed.outcome == "supports"

    def test_receipt_row_cannot_be_deleted(self, any_store: Store) -> None:
        """Raw SQL DELETE of a stored receipt is refused."""
        save_receipt(any_store, "run-1", make_receipt(), reusable=True)
        with pytest.raises(DBAPIError, match="immutable"), any_store.engine.begin() as conn:
            conn.execute(text("DELETE FROM receipts"))
        assert row_count(any_store, receipts) == 1


class TestSaveReceipt:
    def test_same_run_twice_writes_once(self, any_store: Store) -> None:
        """A second save for one run id writes nothing, returns False, adds no event."""
        receipt = make_receipt()
        assert save_receipt(any_store, "run-1", receipt, reusable=True) is True
        assert save_receipt(any_store, "run-1", copy.deepcopy(receipt), reusable=True) is False
        assert row_count(any_store, receipts) == 1
        assert event_kinds(any_store) == ["probe"]

    def test_redelivered_run_keeps_the_first_receipt(self, any_store: Store) -> None:
        """A duplicate delivery with a different result leaves the first receipt standing."""
        first = make_receipt()
        save_receipt(any_store, "run-1", first, reusable=True)
        again = make_receipt(outcome="inconclusive", reason="timeout", elapsed_us=9)
        assert save_receipt(any_store, "run-1", again, reusable=False) is False
        assert load_receipt(any_store, "run-1").receipt_sha256 == first.receipt_sha256
        assert row_count(any_store, receipts) == 1

    def test_probe_event_names_run_and_receipt(self, any_store: Store) -> None:
        """The probe event carries the run id, receipt sha and outcome."""
        receipt = make_receipt()
        save_receipt(any_store, "run-1", receipt, reusable=True)
        with any_store.reading() as conn:
            (event,) = read_events(conn, 0, 10)
        assert event.subject == receipt.committed.plan_id
        assert event.payload == {
            "run_id": "run-1",
            "receipt_sha256": receipt.receipt_sha256,
            "outcome": "supports",
            "reason": "oracle_passed",
        }

    def test_load_by_sha_or_run_id(self, any_store: Store) -> None:
        """A stored receipt loads by its sha and by its run id, unchanged."""
        receipt = make_receipt()
        save_receipt(any_store, "run-1", receipt, reusable=True)
        assert load_receipt(any_store, receipt.receipt_sha256) == receipt
        assert load_receipt(any_store, "run-1") == receipt

    def test_load_unknown_is_not_found(self, any_store: Store) -> None:
        """An unknown receipt id raises NotFound."""
        with pytest.raises(NotFound):
            load_receipt(any_store, "nope")


class TestReusableReceipt:
    def test_found_by_action_key(self, any_store: Store) -> None:
        """A reusable receipt is found by its action key."""
        receipt = make_receipt(action_key="k" * 64)
        save_receipt(any_store, "run-1", receipt, reusable=True)
        found = find_reusable_receipt(any_store, "k" * 64)
        assert found is not None
        assert found.receipt_sha256 == receipt.receipt_sha256

    def test_not_reusable_is_never_returned(self, any_store: Store) -> None:
        """A receipt stored as not reusable never answers a later action."""
        save_receipt(any_store, "run-1", make_receipt(action_key="k" * 64), reusable=False)
        assert find_reusable_receipt(any_store, "k" * 64) is None

    def test_other_action_key_misses(self, any_store: Store) -> None:
        """A receipt for another action key is not returned."""
        save_receipt(any_store, "run-1", make_receipt(action_key="k" * 64), reusable=True)
        assert find_reusable_receipt(any_store, "j" * 64) is None

    def test_newest_reusable_receipt_is_served(self, any_store: Store) -> None:
        """A later receipt of the same action (e.g. from --no-reuse) replaces the earlier."""
        save_receipt(any_store, "run-1", make_receipt(action_key="k" * 64, elapsed_us=1), True)
        newer = make_receipt(action_key="k" * 64, elapsed_us=2)
        save_receipt(any_store, "run-2", newer, reusable=True)
        found = find_reusable_receipt(any_store, "k" * 64)
        assert found is not None
        assert found.receipt_sha256 == newer.receipt_sha256

    def test_inconclusive_is_never_reused(self, any_store: Store) -> None:
        """An inconclusive receipt never answers a later action, even marked reusable."""
        receipt = make_receipt(action_key="k" * 64, outcome="inconclusive")
        save_receipt(any_store, "run-1", receipt, reusable=True)
        assert find_reusable_receipt(any_store, "k" * 64) is None
