"""knowledge_query: related claims by text and path, confined to a scope, rechecked."""

from __future__ import annotations

import pytest

from probe_service.claims import (
    ReceiptLookup,
    claim_create,
    claim_withdraw,
    knowledge_query,
    knowledge_record_answer,
)
from probe_service.errors import InvalidClaim
from probe_service.store import Store

from .helpers import PARSE_PY, WorkTree, claim_request, grep


@pytest.fixture
def snap(tree: WorkTree, receipts: ReceiptLookup) -> str:
    snap = tree.write("src/parse.py", PARSE_PY).write("src/pay.py", "pay = 1\n").capture()
    claim_create(tree.store, claim_request(snap), receipts=receipts)
    other = claim_request(
        snap, {"query_set": {"query": grep("pay", "src/pay.py")}},
        statement="refunds are idempotent", scope="billing",
    )  # fmt: skip
    claim_create(tree.store, other, receipts=receipts)
    return snap


def test_text_match_finds_the_claim_with_applicability(store: Store, snap: str) -> None:
    """Words of the statement find it, with a fresh applicability check."""
    hits = knowledge_query(store, scope="payments", target_snapshot=snap,
                           text="does parse accept a trailing comma?")  # fmt: skip
    assert [h.claim.statement for h in hits] == ["parse() accepts a trailing comma"]
    assert hits[0].applicability.state == "current"
    assert hits[0].matched_by == ("text",)


def test_stemming_matches_word_forms(store: Store, snap: str) -> None:
    """``accepting commas`` reaches ``accepts a trailing comma``."""
    hits = knowledge_query(store, scope="payments", target_snapshot=snap,
                           text="accepting commas")  # fmt: skip
    assert len(hits) == 1


def test_irrelevant_query_returns_nothing(store: Store, snap: str) -> None:
    """A query whose words do not all occur returns nothing, not the least-bad match."""
    assert knowledge_query(store, scope="payments", target_snapshot=snap,
                           text="trailing comma database migration") == []  # fmt: skip


def test_other_scope_is_never_consulted(store: Store, snap: str) -> None:
    """An empty result in a scope is never answered from another scope."""
    assert knowledge_query(store, scope="payments", target_snapshot=snap,
                           text="refunds idempotent") == []  # fmt: skip
    assert knowledge_query(store, scope="nowhere", target_snapshot=snap,
                           text="trailing comma") == []  # fmt: skip


def test_path_match_uses_exact_and_domain_dependencies(store: Store, snap: str) -> None:
    """A path reaches claims whose exact_blob or domain covers it."""
    hits = knowledge_query(store, scope="billing", target_snapshot=snap, paths=["src/pay.py"])
    assert [h.claim.statement for h in hits] == ["refunds are idempotent"]
    assert hits[0].matched_by == ("path:src/pay.py",)


def test_stale_claim_is_reported_stale(tree: WorkTree, snap: str) -> None:
    """Applicability is rechecked against the target snapshot."""
    end = tree.write("src/parse.py", "changed\n").capture()
    hits = knowledge_query(tree.store, scope="payments", target_snapshot=end,
                           paths=["src/parse.py"])  # fmt: skip
    assert hits[0].applicability.state == "needs_recheck"


def test_withdrawn_claims_are_not_returned(store: Store, snap: str) -> None:
    """A tombstoned claim is not offered as knowledge."""
    hit = knowledge_query(store, scope="payments", target_snapshot=snap, text="comma")[0]
    claim_withdraw(store, hit.claim.claim_id, "wrong")
    assert knowledge_query(store, scope="payments", target_snapshot=snap, text="comma") == []


def test_answers_are_searchable_by_their_question(store: Store, snap: str) -> None:
    """A recorded answer is found through its question and stays unresolved."""
    knowledge_record_answer(store, {
        "scope": "payments", "question": "Where are currencies rounded?",
        "answer": "In src/pay.py.", "snapshot_id": snap,
        "dependencies": [{"exact_blob": {"path": "src/pay.py"}}],
    })  # fmt: skip
    hits = knowledge_query(store, scope="payments", target_snapshot=snap,
                           text="currencies rounded")  # fmt: skip
    assert [h.claim.outcome for h in hits] == ["unresolved"]


def test_fts_syntax_in_the_query_is_inert(store: Store, snap: str) -> None:
    """Quotes, operators and column filters are words, never FTS syntax."""
    hits = knowledge_query(store, scope="payments", target_snapshot=snap,
                           text='comma" OR scope:billing NEAR(*')  # fmt: skip
    assert hits == []


def test_empty_query_is_refused(store: Store, snap: str) -> None:
    """Neither text nor paths is an input error."""
    with pytest.raises(InvalidClaim):
        knowledge_query(store, scope="payments", target_snapshot=snap)
