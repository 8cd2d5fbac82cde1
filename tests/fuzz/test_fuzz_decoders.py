"""Every decoder either decodes its input or raises its one documented error type.

Inputs are arbitrary JSON, arbitrary text, and near-valid documents with one field
changed. Decoders that write (plan persist, claim create) are checked to leave every
table untouched when they refuse. See docs/ARCHITECTURE.md on errors: one root,
``ProbeServiceError``, and a single error type per decoder.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
import zstandard
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from probe_service.claims import ReceiptLookup, claim_create
from probe_service.claims.receipts import ReceiptFacts
from probe_service.errors import (
    InvalidInput,
    InvalidPlan,
    PolicyError,
    ReceiptInvalid,
    UnsafePath,
)
from probe_service.plans import parse_plan
from probe_service.plans.receipts import verify_receipt
from probe_service.policies.loader import load_policy_file
from probe_service.queue.submit import read_plans_file
from probe_service.snapshot.manifest import decode_manifest, file_record
from probe_service.store import Store, open_store

from ..calls import probe_plan
from ..claims.helpers import PARSE_PY, STUB_RECEIPTS, WorkTree, claim_request
from ..plans.conftest import plan_doc
from ..policies.conftest import document
from ..receipt_fields import committed_fields, operational_fields, receipt_of
from .strategies import fed, json_texts, json_values, mutated, row_counts

pytestmark = pytest.mark.fuzz

#: Module-scoped stores are shared by every example of a test.
FUZZ = settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
STORE_FUZZ = settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    root = tmp_path_factory.mktemp("fuzz-state")
    opened = open_store(root)
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def snapshot_id(tmp_path_factory: pytest.TempPathFactory, store: Store) -> str:
    work = tmp_path_factory.mktemp("fuzz-work")
    return WorkTree(work, store).write("src/parse.py", PARSE_PY).capture()


def _receipts(receipt_id: str) -> ReceiptFacts | None:
    outcome = STUB_RECEIPTS.get(receipt_id)
    return None if outcome is None else ReceiptFacts(outcome=outcome)


RECEIPTS: ReceiptLookup = _receipts


class TestPlan:
    @FUZZ
    @given(json_values | json_texts | st.binary(max_size=40) | mutated(plan_doc()))
    @example("[" * 5000)
    @example({"snapshot_id": "a" * 64, "args": ["\ud800"]})
    def test_parse_plan_decodes_or_raises_invalid_plan(self, value: Any) -> None:
        """parse_plan never raises anything but InvalidPlan."""
        with contextlib.suppress(InvalidPlan):
            parse_plan(fed(value))

    @STORE_FUZZ
    @given(data=st.data())
    def test_refused_plan_writes_nothing(self, store: Store, snapshot_id: str, data: Any) -> None:
        """probe_plan refuses with InvalidInput and leaves every table as it was."""
        value = data.draw(mutated(plan_doc(snapshot_id=snapshot_id)) | json_values)
        before = row_counts(store)
        try:
            probe_plan(store, fed(value))
        except InvalidInput:
            assert row_counts(store) == before


class TestPolicyFile:
    @FUZZ
    @given(st.binary(max_size=200) | json_texts.map(str.encode) | mutated(document()))
    def test_load_policy_file_decodes_or_raises_policy_error(
        self, tmp_path_factory: pytest.TempPathFactory, raw: Any
    ) -> None:
        """Any bytes in the policy file load or raise PolicyError."""
        path = tmp_path_factory.getbasetemp() / "fuzz-policies.json"
        data = raw if isinstance(raw, bytes) else json.dumps(raw).encode()
        path.write_bytes(data)
        path.chmod(0o600)
        with contextlib.suppress(PolicyError):
            load_policy_file(fed(path))


class TestClaim:
    @STORE_FUZZ
    @given(data=st.data())
    @example(data=None)
    def test_refused_claim_writes_nothing(self, store: Store, snapshot_id: str, data: Any) -> None:
        """claim_create refuses with InvalidInput and writes nothing."""
        valid = claim_request(snapshot_id)
        value = valid if data is None else data.draw(mutated(valid) | json_values)
        before = row_counts(store)
        try:
            claim_create(store, fed(value), receipts=RECEIPTS)
        except InvalidInput:
            assert row_counts(store) == before


class TestSubmitLines:
    @FUZZ
    @given(st.lists(json_texts | mutated(plan_doc()).map(json.dumps), min_size=1, max_size=4))
    @example(["[" * 5000])
    def test_read_plans_file_decodes_or_raises_invalid_input(
        self, tmp_path_factory: pytest.TempPathFactory, lines: list[str]
    ) -> None:
        """Each JSONL line is a plan, a plan id, or part of one InvalidPlan listing them."""
        path = tmp_path_factory.getbasetemp() / "fuzz-plans.jsonl"
        path.write_text("\n".join(lines), encoding="utf-8", errors="surrogatepass")
        with contextlib.suppress(InvalidInput):
            read_plans_file(fed(path), "test-policy")


def _receipt() -> dict[str, Any]:
    return receipt_of(committed_fields(), operational_fields()).to_json()


class TestReceipt:
    def test_the_valid_receipt_verifies(self) -> None:
        """The base of the mutations is itself a valid receipt."""
        verify_receipt(_receipt())

    @FUZZ
    @given(json_values | mutated(_receipt()))
    def test_verify_receipt_verifies_or_raises_receipt_invalid(self, value: Any) -> None:
        """verify_receipt never raises anything but ReceiptInvalid."""
        with contextlib.suppress(ReceiptInvalid):
            verify_receipt(fed(value))


def _manifest(records: Any) -> tuple[str, bytes]:
    raw = json.dumps({"entries": records}).encode()
    return hashlib.sha256(raw).hexdigest(), zstandard.ZstdCompressor().compress(raw)


VALID_RECORD = file_record("src/a.py", False, "0" * 64, 1)


class TestManifest:
    @FUZZ
    @given(st.binary(max_size=80) | json_values.map(lambda v: json.dumps(v).encode()))
    def test_raw_blobs_decode_or_raise_unsafe_path(self, blob: bytes) -> None:
        """Undecompressable or uncompressed bytes raise UnsafePath."""
        for candidate in (blob, zstandard.ZstdCompressor().compress(blob)):
            with contextlib.suppress(UnsafePath):
                decode_manifest(hashlib.sha256(blob).hexdigest(), fed(candidate))

    @FUZZ
    @given(st.lists(json_values | mutated(VALID_RECORD), max_size=3))
    def test_records_decode_or_raise_unsafe_path(self, records: list[Any]) -> None:
        """A manifest that hashes to its id but holds odd records raises UnsafePath."""
        snapshot_id, blob = _manifest(records)
        with contextlib.suppress(UnsafePath):
            decode_manifest(snapshot_id, fed(blob))


def test_claim_base_is_valid(store: Store, snapshot_id: str) -> None:
    """The mutation base for claims is accepted: the fuzzer explores near a valid claim."""
    record = claim_create(store, claim_request(snapshot_id), receipts=RECEIPTS)
    assert record.snapshot_id == snapshot_id
