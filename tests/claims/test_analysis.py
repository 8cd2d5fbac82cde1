"""change_analyze: index lookup, one obligation per stale claim, idempotent, events."""

from __future__ import annotations

import pytest

from probe_service.claims import (
    ReceiptLookup,
    change_analyze,
    claim_check,
    claim_create,
    obligation_list,
)
from probe_service.claims.analysis import affected_claims
from probe_service.errors import NotFound
from probe_service.store import read_events

from .helpers import PARSE_PY, WorkTree, claim_request, grep


def make(tree: WorkTree, receipts: ReceiptLookup, snap: str, *deps: dict[str, object]) -> str:
    return claim_create(tree.store, claim_request(snap, *deps), receipts=receipts).claim_id


@pytest.fixture
def start(tree: WorkTree) -> str:
    return (
        tree.write("src/parse.py", PARSE_PY)
        .write("src/pkg/util.py", "x = 1\n")
        .write("docs/a.md", "doc\n")
        .capture()
    )


class TestIndex:
    def test_exact_path_and_domain_claims_are_found(
        self, tree: WorkTree, start: str, receipts: ReceiptLookup
    ) -> None:
        """Changed paths reach claims through the path index and the domain prefix index."""
        by_path = make(tree, receipts, start, {"exact_blob": {"path": "src/pkg/util.py"}})
        by_domain = make(tree, receipts, start, {"query_set": {"query": grep("x", "src/pkg/*.py")}})
        by_root = make(tree, receipts, start, {"query_set": {"query": grep("x", "**/*.py")}})
        make(tree, receipts, start, {"exact_blob": {"path": "docs/a.md"}})
        make(tree, receipts, start, {"query_set": {"query": grep("x", "docs/**")}})
        with tree.store.reading() as conn:
            found = affected_claims(conn, ["src/pkg/util.py"], None)
        assert found == {by_path, by_domain, by_root}

    def test_a_domain_glob_that_does_not_match_is_not_a_candidate(
        self, tree: WorkTree, start: str, receipts: ReceiptLookup
    ) -> None:
        """Sharing a prefix is not enough: the glob must match the changed path."""
        make(tree, receipts, start, {"query_set": {"query": grep("x", "src/*.md")}})
        with tree.store.reading() as conn:
            assert affected_claims(conn, ["src/pkg/util.py"], None) == set()


class TestObligations:
    def test_stale_claim_gets_one_obligation(
        self, tree: WorkTree, start: str, receipts: ReceiptLookup
    ) -> None:
        """A claim whose dependency changed gets exactly one open obligation."""
        claim_id = make(tree, receipts, start)
        end = tree.write("src/parse.py", "changed\n").capture()
        result = change_analyze(tree.store, start, end)
        assert [o.claim_id for o in result.opened] == [claim_id]
        assert result.opened[0].from_snapshot_id == start

    def test_candidate_that_is_still_current_gets_none(
        self, tree: WorkTree, start: str, receipts: ReceiptLookup
    ) -> None:
        """A touched domain whose negative query still holds opens nothing."""
        make(tree, receipts, start, {"negative_query": {"query": grep("legacy")}})
        end = tree.write("src/new.py", "fine\n").capture()
        result = change_analyze(tree.store, start, end)
        assert result.candidates == 1
        assert result.opened == ()

    def test_same_pair_twice_opens_nothing_new(
        self, tree: WorkTree, start: str, receipts: ReceiptLookup
    ) -> None:
        """Analysis is idempotent: the unique (claim, snapshot) constraint holds."""
        make(tree, receipts, start)
        end = tree.write("src/parse.py", "changed\n").capture()
        first = change_analyze(tree.store, start, end)
        second = change_analyze(tree.store, start, end)
        assert len(first.opened) == 1
        assert second.opened == ()
        assert len(obligation_list(tree.store)) == 1

    def test_obligation_event_carries_the_applicability(
        self, tree: WorkTree, start: str, receipts: ReceiptLookup
    ) -> None:
        """Each opened obligation is announced once, with the claim's applicability."""
        claim_id = make(tree, receipts, start)
        end = tree.write("src/parse.py", "changed\n").capture()
        change_analyze(tree.store, start, end)
        with tree.store.reading() as conn:
            events = [e for e in read_events(conn, 0, 1000) if e.kind == "obligation_opened"]
        assert [(e.payload["claim_id"], e.payload["applicability"]) for e in events] == [
            (claim_id, "needs_recheck")
        ]

    def test_stale_check_without_new_obligation_emits_applicability(
        self, tree: WorkTree, start: str, receipts: ReceiptLookup
    ) -> None:
        """A stale claim_check is announced as a claim_applicability event."""
        claim_id = make(tree, receipts, start)
        end = tree.write("src/parse.py", "changed\n").capture()
        claim_check(tree.store, [claim_id], end)
        with tree.store.reading() as conn:
            events = [e for e in read_events(conn, 0, 1000) if e.kind == "claim_applicability"]
        assert [(e.subject, e.payload["state"]) for e in events] == [(claim_id, "needs_recheck")]

    def test_missing_snapshot_is_not_found(self, tree: WorkTree, start: str) -> None:
        """Both snapshots must be in the store."""
        with pytest.raises(NotFound, match="to_snapshot"):
            change_analyze(tree.store, start, "0" * 64)

    def test_scope_filter_leaves_other_scopes_alone(
        self, tree: WorkTree, start: str, receipts: ReceiptLookup
    ) -> None:
        """An analysis confined to one scope opens nothing in another (a scope without
        claims is accepted only when the caller says so)."""
        make(tree, receipts, start)
        end = tree.write("src/parse.py", "changed\n").capture()
        analysis = change_analyze(tree.store, start, end, scope="elsewhere", allow_empty=True)
        assert analysis.opened == ()
