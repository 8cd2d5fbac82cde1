"""Obligations: listing by filter, resolution with a retained rationale, the gate."""

from __future__ import annotations

import pytest

from probe_service.claims import (
    ReceiptLookup,
    change_analyze,
    claim_create,
    claim_show,
    gate,
    obligation_list,
    obligation_resolve,
    store_receipts,
)
from probe_service.claims.records import Obligation
from probe_service.errors import Conflict, InvalidClaim, NotFound

from .helpers import PARSE_PY, WorkTree, claim_request, stored_receipt


@pytest.fixture
def opened(tree: WorkTree, receipts: ReceiptLookup) -> Obligation:
    start = tree.write("src/parse.py", PARSE_PY).capture()
    claim_create(tree.store, claim_request(start), receipts=receipts)
    end = tree.write("src/parse.py", "changed\n").capture()
    return change_analyze(tree.store, start, end).opened[0]


class TestList:
    def test_filters_by_scope_state_and_claim(self, tree: WorkTree, opened: Obligation) -> None:
        """Every filter narrows the list."""
        store = tree.store
        assert obligation_list(store, scope="payments", state="open") == [opened]
        assert obligation_list(store, scope="other") == []
        assert obligation_list(store, state="resolved") == []
        assert obligation_list(store, claim_id=opened.claim_id) == [opened]


class TestResolve:
    def test_accepted_risk_keeps_the_rationale(self, tree: WorkTree, opened: Obligation) -> None:
        """The rationale is stored with the resolution."""
        done = obligation_resolve(tree.store, opened.obligation_id, "accepted_risk", "docs only")
        assert (done.state, done.rationale) == ("resolved", "docs only")
        assert obligation_list(tree.store, state="open") == []

    def test_rationale_is_required(self, tree: WorkTree, opened: Obligation) -> None:
        """An empty rationale is refused."""
        with pytest.raises(InvalidClaim, match="rationale"):
            obligation_resolve(tree.store, opened.obligation_id, "accepted_risk", "  ")

    def test_unknown_resolution_is_refused(self, tree: WorkTree, opened: Obligation) -> None:
        """Only the four resolutions exist."""
        with pytest.raises(InvalidClaim, match="resolution"):
            obligation_resolve(tree.store, opened.obligation_id, "ignored", "why")

    def test_rechecked_names_a_known_receipt(self, tree: WorkTree) -> None:
        """``rechecked`` needs a receipt of the claim's plan on the target, and keeps it."""
        lookup = store_receipts(tree.store)
        start = tree.write("src/parse.py", PARSE_PY).capture()
        first = stored_receipt(tree.store, "supports", start, run_id="r1")
        request = claim_request(start, evidence=[{"receipt": first}])
        claim_create(tree.store, request, receipts=lookup)
        end = tree.write("src/parse.py", "changed\n").capture()
        opened = change_analyze(tree.store, start, end).opened[0]
        with pytest.raises(InvalidClaim, match="receipt"):
            obligation_resolve(tree.store, opened.obligation_id, "rechecked", "ran it")
        again = stored_receipt(tree.store, "supports", end, run_id="r2")
        done = obligation_resolve(
            tree.store, opened.obligation_id, "rechecked", "ran it",
            receipt=again, receipts=lookup,
        )  # fmt: skip
        assert done.receipt == again

    def test_superseded_names_and_links_the_successor(
        self, tree: WorkTree, opened: Obligation, receipts: ReceiptLookup
    ) -> None:
        """``superseded`` links the named successor claim."""
        snap = tree.capture()
        successor = claim_create(
            tree.store, claim_request(snap, statement="new"), receipts=receipts
        )
        obligation_resolve(
            tree.store, opened.obligation_id, "superseded", "rewritten",
            successor_claim_id=successor.claim_id,
        )  # fmt: skip
        assert claim_show(tree.store, opened.claim_id).superseded_by == successor.claim_id

    def test_withdrawn_leaves_a_tombstone(self, tree: WorkTree, opened: Obligation) -> None:
        """``withdrawn`` withdraws the claim."""
        obligation_resolve(tree.store, opened.obligation_id, "withdrawn", "was wrong")
        assert claim_show(tree.store, opened.claim_id).withdrawn

    def test_second_resolution_is_a_conflict(self, tree: WorkTree, opened: Obligation) -> None:
        """A resolved obligation stays resolved as first recorded."""
        obligation_resolve(tree.store, opened.obligation_id, "accepted_risk", "fine")
        with pytest.raises(Conflict):
            obligation_resolve(tree.store, opened.obligation_id, "withdrawn", "changed my mind")

    def test_unknown_obligation_is_not_found(self, tree: WorkTree) -> None:
        """Resolving nothing is NotFound."""
        with pytest.raises(NotFound):
            obligation_resolve(tree.store, "obl_nope", "accepted_risk", "why")


class TestGate:
    def test_gate_closes_on_stale_claims_and_opens_after_resolution(
        self, tree: WorkTree, receipts: ReceiptLookup
    ) -> None:
        """The gate fails while an obligation in scope is open and passes once resolved."""
        start = tree.write("src/parse.py", PARSE_PY).capture()
        claim_create(tree.store, claim_request(start), receipts=receipts)
        assert gate(tree.store, start, scope="payments").passed
        end = tree.write("src/parse.py", "changed\n").capture()
        closed = gate(tree.store, end, scope="payments")
        assert not closed.passed
        assert len(closed.opened) == 1
        again = gate(tree.store, end, scope="payments")
        assert again.opened == ()
        assert not again.passed
        obligation_resolve(tree.store, closed.opened[0].obligation_id, "accepted_risk", "ok")
        assert gate(tree.store, end, scope="payments").passed

    def test_gate_on_a_missing_snapshot_is_refused(
        self, tree: WorkTree, receipts: ReceiptLookup
    ) -> None:
        """The gate never judges a snapshot it does not hold: NotFound, no obligation."""
        start = tree.write("src/parse.py", PARSE_PY).capture()
        claim_create(tree.store, claim_request(start), receipts=receipts)
        with pytest.raises(NotFound, match="snapshot_id"):
            gate(tree.store, "9" * 64, scope="payments")
        assert obligation_list(tree.store) == []
