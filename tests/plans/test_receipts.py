"""Receipts: the commitment round-trips offline and every tampering is caught and named."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probe_service.canonical import canonical_json
from probe_service.errors import ReceiptInvalid
from probe_service.plans import verify_receipt
from probe_service.plans.receipt_model import CommittedV1

from ..receipt_fields import committed_fields, operational_fields, receipt_of

#: The fields every version-1 receipt commits to (the optional ones aside).
COMMITTED_FIELDS = tuple(n for n, f in CommittedV1.model_fields.items() if f.is_required())


@pytest.fixture
def receipt() -> dict[str, Any]:
    """A freshly built, valid receipt, as it would come back from JSON."""
    built = receipt_of(committed_fields(), operational_fields())
    return dict(json.loads(json.dumps(built.to_json())))


def caught(receipt: dict[str, Any]) -> str:
    with pytest.raises(ReceiptInvalid) as info:
        verify_receipt(receipt)
    return str(info.value)


def different_value(value: Any) -> Any:
    """A JSON value whose canonical form differs from ``value``'s."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, dict):
        return {**value, "tampered": True}
    return "tampered"


class TestRoundTrip:
    def test_build_then_verify(self, receipt: dict[str, Any]) -> None:
        """A built receipt verifies and verification returns its receipt_sha256."""
        assert verify_receipt(receipt) == receipt["receipt_sha256"]

    def test_commitment_is_sha256_of_canonical_committed(self, receipt: dict[str, Any]) -> None:
        """receipt_sha256 is SHA-256 over sorted, compact, UTF-8 JSON of the committed fields."""
        raw = json.dumps(
            committed_fields(), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        ).encode("utf-8")
        assert receipt["receipt_sha256"] == hashlib.sha256(raw).hexdigest()

    def test_build_refuses_missing_committed_field(self) -> None:
        """Committed fields missing one are refused, naming it."""
        committed = committed_fields()
        del committed["sandbox_digest"]
        with pytest.raises(ReceiptInvalid, match="sandbox_digest"):
            receipt_of(committed, {})

    @pytest.mark.parametrize("document", [None, [], "receipt", 1, {}])
    def test_not_a_receipt(self, document: object) -> None:
        """Something that is not a receipt object is refused."""
        with pytest.raises(ReceiptInvalid):
            verify_receipt(document)


class TestTamperingCaught:
    @pytest.mark.parametrize("field", COMMITTED_FIELDS)
    def test_each_committed_field(self, receipt: dict[str, Any], field: str) -> None:
        """Changing any committed field is caught, and the message names that field."""
        receipt["committed"][field] = different_value(receipt["committed"][field])
        assert field in caught(receipt)

    def test_nested_value_in_plan(self, receipt: dict[str, Any]) -> None:
        """A change deep inside the committed plan is caught and named as 'plan'."""
        receipt["committed"]["plan"]["oracle"]["source"] = "published_specification"
        assert "plan" in caught(receipt)

    def test_receipt_sha256_changed(self, receipt: dict[str, Any]) -> None:
        """A receipt_sha256 that is not the commitment of the fields is caught."""
        receipt["receipt_sha256"] = "0" * 64
        assert "receipt_sha256" in caught(receipt)

    @pytest.mark.parametrize("field", ["outcome", "stdout_sha256", "elapsed_us"])
    def test_field_removed(self, receipt: dict[str, Any], field: str) -> None:
        """Removing a committed field is caught, naming it."""
        del receipt["committed"][field]
        assert field in caught(receipt)

    def test_field_added(self, receipt: dict[str, Any]) -> None:
        """Adding a field to the committed section is caught, naming it."""
        receipt["committed"]["trusted"] = True
        assert "trusted" in caught(receipt)

    def test_field_and_digest_changed_consistently(self, receipt: dict[str, Any]) -> None:
        """Rewriting a field and its field digest together is still caught by the commitment."""
        receipt["committed"]["outcome"] = "refutes"
        receipt["field_digests"]["outcome"] = hashlib.sha256(b'"refutes"').hexdigest()
        assert "receipt_sha256" in caught(receipt)

    def test_field_changed_and_digests_dropped(self, receipt: dict[str, Any]) -> None:
        """Dropping field_digests does not let a changed field through."""
        receipt["committed"]["outcome"] = "refutes"
        del receipt["field_digests"]
        assert "receipt_sha256" in caught(receipt)

    def test_committed_section_missing(self, receipt: dict[str, Any]) -> None:
        """A receipt without its committed section is refused."""
        del receipt["committed"]
        assert "committed" in caught(receipt)

    @pytest.mark.parametrize("stream", ["stdout", "stderr"])
    def test_kept_output_not_matching_its_digest(
        self, receipt: dict[str, Any], stream: str
    ) -> None:
        """Output kept beside the receipt that does not hash to the committed digest is caught."""
        receipt["operational"][f"{stream}_b64"] = base64.b64encode(b"forged output").decode()
        assert f"{stream}_b64" in caught(receipt)

    def test_kept_output_not_base64(self, receipt: dict[str, Any]) -> None:
        """Kept output that is not base64 is refused, naming the field."""
        receipt["operational"]["stdout_b64"] = "not base64!"
        assert "stdout_b64" in caught(receipt)


class TestOperationalFields:
    @pytest.mark.parametrize(
        ("field", "value"),
        [
            ("worker", "host-b"),
            ("run_id", "another-run"),
            ("started_at", "2030-01-01T00:00:00+00:00"),
            ("finished_at", "2030-01-01T00:00:09+00:00"),
            ("wall_seconds", 9.5),
            ("memory_peak_bytes", 123_456_789),
            ("queue_wait_seconds", 3.0),
        ],
    )
    def test_may_change(self, receipt: dict[str, Any], field: str, value: object) -> None:
        """Operational fields sit outside the commitment: changing them still verifies."""
        receipt["operational"][field] = value
        assert verify_receipt(receipt) == receipt["receipt_sha256"]

    def test_kept_output_may_be_dropped(self, receipt: dict[str, Any]) -> None:
        """A receipt without its kept output (only the digests) still verifies."""
        del receipt["operational"]["stdout_b64"]
        del receipt["operational"]["stderr_b64"]
        assert verify_receipt(receipt) == receipt["receipt_sha256"]


_JSON_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
_JSON = st.recursive(
    _JSON_LEAF,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)


def _leaf_paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside ``value`` (containers included)."""
    found = [path] if path else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _leaf_paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _leaf_paths(item, (*path, index))
    return found


class TestTamperingProperty:
    @settings(max_examples=150, deadline=None)
    @given(data=st.data())
    def test_any_mutation_of_a_committed_value_is_detected(self, data: st.DataObject) -> None:
        """Replacing any committed value, at any depth, by any other JSON value is caught."""
        receipt = receipt_of(committed_fields(), operational_fields()).to_json()
        tampered = copy.deepcopy(receipt)
        path = data.draw(st.sampled_from(_leaf_paths(tampered["committed"])))
        parent = tampered["committed"]
        for step in path[:-1]:
            parent = parent[step]
        old = parent[path[-1]]
        parent[path[-1]] = data.draw(
            _JSON.filter(lambda v: canonical_json(v) != canonical_json(old))
        )
        with pytest.raises(ReceiptInvalid, match=str(path[0])):
            verify_receipt(tampered)
