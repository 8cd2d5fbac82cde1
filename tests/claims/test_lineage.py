"""Supersession chains and tombstones; a rejected successor changes nothing."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from probe_service.claims import (
    ReceiptLookup,
    claim_create,
    claim_show,
    claim_supersede,
    claim_withdraw,
    supersession_chain,
)
from probe_service.claims.tables import claim_audit, claims
from probe_service.errors import Conflict, InvalidClaim, NotFound
from probe_service.store import Store

from .helpers import PARSE_PY, WorkTree, claim_request, grep


@pytest.fixture
def snap(tree: WorkTree) -> str:
    return tree.write("src/parse.py", PARSE_PY).capture()


def counts(store: Store) -> tuple[int, int]:
    with store.reading() as conn:
        n_claims = conn.execute(select(func.count()).select_from(claims)).scalar_one()
        n_audit = conn.execute(select(func.count()).select_from(claim_audit)).scalar_one()
    return n_claims, n_audit


class TestSupersession:
    def test_chain_is_kept_and_walkable(
        self, store: Store, snap: str, receipts: ReceiptLookup
    ) -> None:
        """A → B → C is walkable from any link, oldest first."""
        a = claim_create(store, claim_request(snap), receipts=receipts)
        b = claim_supersede(store, a.claim_id, claim_request(snap, statement="b"),
                            rationale="refined", receipts=receipts)  # fmt: skip
        c = claim_supersede(store, b.claim_id, claim_request(snap, statement="c"),
                            rationale="refined again", receipts=receipts)  # fmt: skip
        expected = [a.claim_id, b.claim_id, c.claim_id]
        assert supersession_chain(store, b.claim_id) == expected
        assert claim_show(store, a.claim_id).superseded_by == b.claim_id
        assert claim_show(store, c.claim_id).supersedes == b.claim_id

    def test_rejected_successor_leaves_predecessor_untouched(
        self, store: Store, snap: str, receipts: ReceiptLookup
    ) -> None:
        """A successor refused inside the transaction leaves no row and no link."""
        a = claim_create(store, claim_request(snap), receipts=receipts)
        claim_supersede(store, a.claim_id, claim_request(snap, statement="b"),
                        rationale="r", receipts=receipts)  # fmt: skip
        before = (claim_show(store, a.claim_id), counts(store))
        with pytest.raises(Conflict, match="already superseded"):
            claim_supersede(store, a.claim_id, claim_request(snap, statement="c"),
                            rationale="r", receipts=receipts)  # fmt: skip
        assert (claim_show(store, a.claim_id), counts(store)) == before

    def test_invalid_successor_changes_nothing(
        self, store: Store, snap: str, receipts: ReceiptLookup
    ) -> None:
        """A successor whose baseline cannot be computed is refused before any write."""
        a = claim_create(store, claim_request(snap), receipts=receipts)
        before = (claim_show(store, a.claim_id), counts(store))
        bad = claim_request(snap, {"negative_query": {"query": grep("split")}})
        with pytest.raises(InvalidClaim):
            claim_supersede(store, a.claim_id, bad, rationale="r", receipts=receipts)
        assert (claim_show(store, a.claim_id), counts(store)) == before

    def test_successor_in_another_scope_is_refused(
        self, store: Store, snap: str, receipts: ReceiptLookup
    ) -> None:
        """Supersession never crosses scopes."""
        a = claim_create(store, claim_request(snap), receipts=receipts)
        with pytest.raises(NotFound):
            claim_supersede(store, a.claim_id, claim_request(snap, scope="other"),
                            rationale="r", receipts=receipts)  # fmt: skip


class TestTombstones:
    def test_same_statement_and_boundary_after_withdrawal_is_a_conflict(
        self, store: Store, snap: str, receipts: ReceiptLookup
    ) -> None:
        """A withdrawn claim is not silently re-admitted."""
        a = claim_create(store, claim_request(snap), receipts=receipts)
        claim_withdraw(store, a.claim_id, "premise was wrong")
        with pytest.raises(Conflict, match="withdrawn"):
            claim_create(store, claim_request(snap), receipts=receipts)

    def test_whitespace_and_case_do_not_evade_the_tombstone(
        self, store: Store, snap: str, receipts: ReceiptLookup
    ) -> None:
        """The statement is compared normalized."""
        a = claim_create(store, claim_request(snap), receipts=receipts)
        claim_withdraw(store, a.claim_id, "wrong")
        again = claim_request(snap, statement="  PARSE() accepts   a trailing comma ")
        with pytest.raises(Conflict):
            claim_create(store, again, receipts=receipts)

    def test_override_records_it_flagged(
        self, store: Store, snap: str, receipts: ReceiptLookup
    ) -> None:
        """With the explicit override the claim is recorded with ``flagged: tombstone``."""
        a = claim_create(store, claim_request(snap), receipts=receipts)
        claim_withdraw(store, a.claim_id, "wrong")
        b = claim_create(store, claim_request(snap), receipts=receipts, allow_tombstoned=True)
        assert b.flagged == "tombstone"
        assert claim_show(store, b.claim_id).flagged == "tombstone"

    def test_another_boundary_is_admitted(
        self, store: Store, snap: str, receipts: ReceiptLookup
    ) -> None:
        """The same statement with a different boundary is a different claim."""
        a = claim_create(store, claim_request(snap), receipts=receipts)
        claim_withdraw(store, a.claim_id, "wrong")
        other = claim_request(snap, {"query_set": {"query": grep("parse")}})
        assert claim_create(store, other, receipts=receipts).flagged is None

    def test_withdrawing_twice_is_a_conflict(
        self, store: Store, snap: str, receipts: ReceiptLookup
    ) -> None:
        """A tombstone is written once."""
        a = claim_create(store, claim_request(snap), receipts=receipts)
        claim_withdraw(store, a.claim_id, "wrong")
        with pytest.raises(Conflict):
            claim_withdraw(store, a.claim_id, "wrong again")
