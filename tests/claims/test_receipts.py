"""The receipt seam: outcomes come from stored, verified receipts of the plans part."""

from __future__ import annotations

import pytest

from probe_service.claims import claim_create, store_receipts
from probe_service.claims.receipts import outcome_from_receipts
from probe_service.store import Store

from .helpers import PARSE_PY, WorkTree, claim_request, stored_receipt


def test_lookup_returns_the_committed_outcome(store: Store) -> None:
    """A stored receipt's oracle outcome, snapshot and plan are what the lookup reports."""
    receipt_id = stored_receipt(store, "supports", "1" * 64)
    facts = store_receipts(store)(receipt_id)
    assert facts is not None
    assert (facts.outcome, facts.snapshot_id) == ("supports", "1" * 64)
    assert facts.plan_shape is not None


def test_run_id_and_unknown_ids_are_not_receipts(store: Store) -> None:
    """Only a receipt_sha256 names a receipt."""
    stored_receipt(store, "supports", run_id="run-7")
    lookup = store_receipts(store)
    assert lookup("run-7") is None
    assert lookup("0" * 64) is None


def test_claim_outcome_follows_a_real_receipt(tree: WorkTree) -> None:
    """claim_create over the store lookup: a refuting receipt gives a refuted claim."""
    snap = tree.write("src/parse.py", PARSE_PY).capture()
    receipt_id = stored_receipt(tree.store, "refutes", snap)
    request = claim_request(snap, evidence=[{"receipt": receipt_id}])
    record = claim_create(tree.store, request, receipts=store_receipts(tree.store))
    assert record.outcome == "refuted"


@pytest.mark.parametrize(
    ("outcomes", "expected"),
    [
        (["supports", "inconclusive"], "supported"),
        (["refutes", "inconclusive"], "refuted"),
        (["inconclusive"], "unresolved"),
        (["supports", "refutes"], "unresolved"),
    ],
)
def test_outcome_rule(outcomes: list[str], expected: str) -> None:
    """Supported/refuted need an uncontradicted supports/refutes receipt."""
    assert outcome_from_receipts(outcomes) == expected
