"""claim_create and knowledge_record_answer: baselines computed, outcomes from evidence."""

from __future__ import annotations

import hashlib

import pytest

from probe_service.claims import (
    ClaimRecord,
    ReceiptLookup,
    claim_create,
    claim_show,
    knowledge_record_answer,
)
from probe_service.claims.records import ExactBlobBaseline, QueryBaseline
from probe_service.errors import InvalidClaim, NotFound
from probe_service.store import Store, read_events

from .helpers import (
    PARSE_PY,
    RECEIPT_INCONCLUSIVE,
    RECEIPT_REFUTES,
    RECEIPT_SUPPORTS,
    WorkTree,
    claim_request,
    grep,
)


@pytest.fixture
def snap(tree: WorkTree) -> str:
    return tree.write("src/parse.py", PARSE_PY).write("README.md", "hello\n").capture()


def create(store: Store, receipts: ReceiptLookup, request: dict[str, object]) -> ClaimRecord:
    return claim_create(store, request, receipts=receipts)


class TestBaselines:
    def test_exact_blob_baseline_is_the_captured_digest(
        self, store: Store, snap: str, receipts: ReceiptLookup
    ) -> None:
        """The service hashes the file itself; the caller only names the path."""
        record = create(store, receipts, claim_request(snap))
        digest = hashlib.sha256(PARSE_PY.encode()).hexdigest()
        assert record.dependencies == (
            ExactBlobBaseline(
                path="src/parse.py", fingerprint=f"file:{digest}", analyzer_version="exact_blob/2"
            ),
        )

    def test_absent_path_is_captured_as_absence(
        self, store: Store, snap: str, receipts: ReceiptLookup
    ) -> None:
        """An exact_blob on a missing path records that it must stay absent."""
        record = create(store, receipts, claim_request(snap, {"exact_blob": {"path": "no.py"}}))
        assert record.dependencies[0] == ExactBlobBaseline(
            path="no.py", fingerprint=None, analyzer_version="exact_blob/2"
        )

    def test_query_baseline_carries_result_domain_and_version(
        self, store: Store, snap: str, receipts: ReceiptLookup
    ) -> None:
        """A query_set baseline keeps the result digest, membership and analyzer version."""
        record = create(
            store, receipts, claim_request(snap, {"query_set": {"query": grep("parse(")}})
        )
        base = record.dependencies[0]
        assert isinstance(base, QueryBaseline)
        assert (base.match_count, base.members, base.complete) == (2, 1, True)
        assert base.analyzer_version == "grep/1"

    def test_caller_supplied_baseline_fields_are_refused(
        self, store: Store, snap: str, receipts: ReceiptLookup
    ) -> None:
        """A dependency carrying its own digest is rejected: baselines cannot be forged."""
        forged = {"exact_blob": {"path": "src/parse.py", "digest": "0" * 64}}
        with pytest.raises(InvalidClaim, match="dependencies"):
            create(store, receipts, claim_request(snap, forged))

    def test_negative_query_that_already_matches_is_refused(
        self, store: Store, snap: str, receipts: ReceiptLookup
    ) -> None:
        """A negative dependency needs an empty result at the claim's snapshot."""
        dep = {"negative_query": {"query": grep("split")}}
        with pytest.raises(InvalidClaim, match="negative_query"):
            create(store, receipts, claim_request(snap, dep))

    def test_span_hash_is_computed_from_the_snapshot(
        self, store: Store, snap: str, receipts: ReceiptLookup
    ) -> None:
        """A source span is stored with the SHA-256 of exactly its bytes."""
        span = {"span": {"path": "src/parse.py", "start": 4, "end": 9}}
        record = create(store, receipts, claim_request(snap, evidence=[span]))
        assert record.evidence[0].sha256 == hashlib.sha256(PARSE_PY.encode()[4:9]).hexdigest()

    def test_span_past_the_end_is_refused(
        self, store: Store, snap: str, receipts: ReceiptLookup
    ) -> None:
        """A span must lie inside its file."""
        span = {"span": {"path": "src/parse.py", "start": 0, "end": 10_000}}
        with pytest.raises(InvalidClaim, match=r"evidence\[0\]\.span\.end"):
            create(store, receipts, claim_request(snap, evidence=[span]))

    def test_missing_snapshot_is_not_found(self, store: Store, receipts: ReceiptLookup) -> None:
        """A claim names a snapshot the store holds."""
        with pytest.raises(NotFound, match="snapshot_id"):
            create(store, receipts, claim_request("f" * 64))


class TestOutcome:
    @pytest.mark.parametrize(
        ("receipt_ids", "expected"),
        [
            ([RECEIPT_SUPPORTS], "supported"),
            ([RECEIPT_REFUTES], "refuted"),
            ([RECEIPT_INCONCLUSIVE], "unresolved"),
            ([RECEIPT_SUPPORTS, RECEIPT_REFUTES], "unresolved"),
            ([], "unresolved"),
        ],
    )
    def test_outcome_follows_receipts(
        self,
        store: Store,
        snap: str,
        receipts: ReceiptLookup,
        receipt_ids: list[str],
        expected: str,
    ) -> None:
        """Only supports/refutes receipts give supported/refuted; anything else unresolved."""
        evidence = [{"receipt": r} for r in receipt_ids]
        record = create(store, receipts, claim_request(snap, evidence=evidence))
        assert record.outcome == expected

    def test_unknown_receipt_is_refused_naming_the_field(
        self, store: Store, snap: str, receipts: ReceiptLookup
    ) -> None:
        """An id the receipt lookup does not know is InvalidClaim on evidence[i].receipt."""
        with pytest.raises(InvalidClaim, match=r"evidence\[0\]\.receipt"):
            create(store, receipts, claim_request(snap, evidence=[{"receipt": "d" * 64}]))

    def test_asserted_outcome_the_evidence_lacks_is_refused(
        self, store: Store, snap: str, receipts: ReceiptLookup
    ) -> None:
        """A caller cannot claim ``supported`` on inconclusive evidence."""
        request = claim_request(
            snap, evidence=[{"receipt": RECEIPT_INCONCLUSIVE}], outcome="supported"
        )
        with pytest.raises(InvalidClaim, match="outcome"):
            create(store, receipts, request)

    def test_text_evidence_alone_is_unresolved(
        self, store: Store, snap: str, receipts: ReceiptLookup
    ) -> None:
        """Free text never establishes an outcome."""
        record = create(store, receipts, claim_request(snap, evidence=[{"text": "I checked"}]))
        assert record.outcome == "unresolved"


class TestAnswer:
    def test_answer_is_unresolved_however_fresh(self, store: Store, snap: str) -> None:
        """A model-authored answer is stored unresolved, with its span hashed."""
        record = knowledge_record_answer(
            store,
            {
                "scope": "payments",
                "question": "Does parse accept a trailing comma?",
                "answer": "Yes: it splits on commas and keeps the empty tail.",
                "snapshot_id": snap,
                "spans": [{"path": "src/parse.py", "start": 0, "end": 16}],
                "dependencies": [{"exact_blob": {"path": "src/parse.py"}}],
            },
        )
        assert (record.outcome, record.origin) == ("unresolved", "answer")
        assert record.evidence[0].sha256 is not None

    def test_answer_cannot_carry_an_outcome(self, store: Store, snap: str) -> None:
        """The answer model has no outcome field at all."""
        with pytest.raises(InvalidClaim):
            knowledge_record_answer(
                store,
                {"scope": "p", "question": "q", "answer": "a", "snapshot_id": snap,
                 "outcome": "supported", "dependencies": [{"exact_blob": {"path": "x"}}]},
            )  # fmt: skip


class TestPersistence:
    def test_show_returns_what_create_recorded(
        self, store: Store, snap: str, receipts: ReceiptLookup
    ) -> None:
        """claim_show reads back the same record."""
        record = create(store, receipts, claim_request(snap, evidence=[{"text": "t"}]))
        assert claim_show(store, record.claim_id) == record

    def test_create_emits_an_event(self, store: Store, snap: str, receipts: ReceiptLookup) -> None:
        """A claim_created event names the claim and its scope."""
        record = create(store, receipts, claim_request(snap))
        with store.reading() as conn:
            events = [e for e in read_events(conn, 0, 100) if e.kind == "claim_created"]
        assert events[-1].subject == record.claim_id
        assert events[-1].payload["scope"] == "payments"
