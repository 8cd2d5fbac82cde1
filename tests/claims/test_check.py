"""claim_check on real snapshots captured from real directories: each rule of issue 6."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from probe_service.claims import ReceiptLookup, claim_check, claim_create, claim_show
from probe_service.claims.tables import claim_checks
from probe_service.errors import NotFound
from probe_service.store import Store

from ..fuzz.strategies import row_counts
from .helpers import PARSE_PY, WorkTree, claim_request, grep

NEG = {"negative_query": {"query": grep("legacy_parse")}}
SYMBOL_NEG = {
    "negative_query": {
        "query": {"kind": "python_symbol", "name": "legacy_parse", "domain": "src/**/*.py"}
    }
}


def claim(tree: WorkTree, receipts: ReceiptLookup, *deps: dict[str, object]) -> tuple[str, str]:
    snap = tree.capture()
    record = claim_create(tree.store, claim_request(snap, *deps), receipts=receipts)
    return record.claim_id, snap


def state(tree: WorkTree, claim_id: str) -> str:
    return claim_check(tree.store, [claim_id], tree.capture())[0].state


@pytest.fixture
def base(tree: WorkTree) -> WorkTree:
    return tree.write("src/parse.py", PARSE_PY).write("src/other.py", "x = 1\n")


class TestExactBlob:
    def test_unchanged_tree_is_current(self, base: WorkTree, receipts: ReceiptLookup) -> None:
        """Nothing changed: current."""
        claim_id, _ = claim(base, receipts, {"exact_blob": {"path": "src/parse.py"}})
        assert state(base, claim_id) == "current"

    def test_modified_file_needs_recheck(self, base: WorkTree, receipts: ReceiptLookup) -> None:
        """An edited dependency file: needs_recheck."""
        claim_id, _ = claim(base, receipts, {"exact_blob": {"path": "src/parse.py"}})
        assert state(base.write("src/parse.py", "changed\n"), claim_id) == "needs_recheck"

    def test_deleted_file_needs_recheck(self, base: WorkTree, receipts: ReceiptLookup) -> None:
        """A deleted dependency file: needs_recheck."""
        claim_id, _ = claim(base, receipts, {"exact_blob": {"path": "src/parse.py"}})
        assert state(base.delete("src/parse.py"), claim_id) == "needs_recheck"

    def test_created_file_needs_recheck(self, base: WorkTree, receipts: ReceiptLookup) -> None:
        """A path recorded as absent that appears: needs_recheck."""
        claim_id, _ = claim(base, receipts, {"exact_blob": {"path": "src/new.py"}})
        assert state(base.write("src/new.py", ""), claim_id) == "needs_recheck"

    def test_unrelated_change_stays_current(self, base: WorkTree, receipts: ReceiptLookup) -> None:
        """A change elsewhere does not touch the claim."""
        claim_id, _ = claim(base, receipts, {"exact_blob": {"path": "src/parse.py"}})
        assert state(base.write("src/other.py", "y = 2\n"), claim_id) == "current"


class TestQuerySet:
    def test_changed_result_needs_recheck(self, base: WorkTree, receipts: ReceiptLookup) -> None:
        """A new call site changes the grep result."""
        claim_id, _ = claim(base, receipts, {"query_set": {"query": grep("parse(")}})
        assert state(base.write("src/other.py", "parse('x')\n"), claim_id) == "needs_recheck"

    def test_same_result_stays_current(self, base: WorkTree, receipts: ReceiptLookup) -> None:
        """A non-matching edit in the domain leaves the result, and the claim, current."""
        claim_id, _ = claim(base, receipts, {"query_set": {"query": grep("parse(")}})
        assert state(base.write("src/other.py", "y = 3\n"), claim_id) == "current"


class TestNegativeQuery:
    def test_added_non_matching_file_stays_current(
        self, base: WorkTree, receipts: ReceiptLookup
    ) -> None:
        """An added non-match re-evaluates membership and is never reopened needlessly."""
        claim_id, _ = claim(base, receipts, NEG)
        check = claim_check(base.store, [claim_id], base.write("src/n.py", "ok\n").capture())[0]
        assert check.state == "current"
        assert "membership changed" in check.dependencies[0].reason

    def test_added_match_needs_recheck(self, base: WorkTree, receipts: ReceiptLookup) -> None:
        """An added file that matches reopens the claim."""
        claim_id, _ = claim(base, receipts, NEG)
        assert state(base.write("src/n.py", "legacy_parse()\n"), claim_id) == "needs_recheck"

    def test_changed_matching_file_needs_recheck(
        self, base: WorkTree, receipts: ReceiptLookup
    ) -> None:
        """A member edited into a match reopens the claim."""
        claim_id, _ = claim(base, receipts, SYMBOL_NEG)
        edited = base.write("src/other.py", "def legacy_parse():\n    pass\n")
        assert state(edited, claim_id) == "needs_recheck"

    def test_incomplete_baseline_needs_recheck(
        self, base: WorkTree, receipts: ReceiptLookup
    ) -> None:
        """An unparsable member made the baseline incomplete: never current (recorded only
        with the explicit override; without it the claim is refused, see test_trust)."""
        snap = base.write("src/bad.py", "def (:\n").capture()
        request = claim_request(snap, SYMBOL_NEG)
        record = claim_create(base.store, request, receipts=receipts, allow_incomplete=True)
        assert state(base, record.claim_id) == "needs_recheck"

    def test_outdated_baseline_is_recomputed_not_misread(
        self, base: WorkTree, receipts: ReceiptLookup, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A baseline another analyzer version made is recomputed at the claim's snapshot
        and then compared: unchanged code stays current, a new match reopens it."""
        from probe_service.claims import queries

        monkeypatch.setitem(queries.ANALYZER_VERSION, "grep", "grep/0")
        claim_id, _ = claim(base, receipts, NEG)
        monkeypatch.setitem(queries.ANALYZER_VERSION, "grep", "grep/1")
        assert state(base, claim_id) == "current"
        assert state(base.write("src/x.py", "legacy_parse()\n"), claim_id) == "needs_recheck"


class TestMissingData:
    def test_missing_snapshot_is_not_found(self, base: WorkTree, receipts: ReceiptLookup) -> None:
        """A target snapshot the store does not hold is refused naming it; nothing is
        recorded (docs/ARCHITECTURE.md, "Claims: the gate")."""
        claim_id, _ = claim(base, receipts, NEG)
        before = row_counts(base.store)
        with pytest.raises(NotFound, match="target_snapshot"):
            claim_check(base.store, [claim_id], "e" * 64)
        assert row_counts(base.store) == before

    def test_missing_blob_is_unknown(self, base: WorkTree, receipts: ReceiptLookup) -> None:
        """A blob the store lost makes a query dependency unknown."""
        claim_id, _ = claim(base, receipts, NEG)
        target = base.write("src/n.py", "fresh content\n").capture()
        import hashlib

        from sqlalchemy import delete

        from probe_service.store.schema import blobs

        lost = hashlib.sha256(b"fresh content\n").hexdigest()
        with base.store.transaction() as conn:
            conn.execute(delete(blobs).where(blobs.c.digest == lost))
        assert claim_check(base.store, [claim_id], target)[0].state == "unknown"

    def test_unknown_claim_is_not_found(self, store: Store) -> None:
        """Checking an id that names nothing raises NotFound."""
        with pytest.raises(NotFound):
            claim_check(store, ["clm_nope"], "e" * 64)


class TestRecordKeeping:
    def test_outcome_is_never_edited_by_a_check(
        self, base: WorkTree, receipts: ReceiptLookup
    ) -> None:
        """A stale check records applicability separately; the claim row is unchanged."""
        claim_id, _ = claim(base, receipts, {"exact_blob": {"path": "src/parse.py"}})
        before = claim_show(base.store, claim_id)
        state(base.write("src/parse.py", "changed\n"), claim_id)
        assert claim_show(base.store, claim_id) == before

    def test_check_is_recorded_in_its_own_table(
        self, base: WorkTree, receipts: ReceiptLookup
    ) -> None:
        """Each check appends a claim_checks row with the state."""
        claim_id, _ = claim(base, receipts, {"exact_blob": {"path": "src/parse.py"}})
        state(base, claim_id)
        with base.store.reading() as conn:
            rows = conn.execute(
                select(claim_checks.c.state).where(claim_checks.c.claim_id == claim_id)
            )
            assert [r[0] for r in rows] == ["current"]
