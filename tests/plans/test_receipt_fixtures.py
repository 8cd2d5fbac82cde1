"""Receipts written by earlier releases read back into the typed model byte for byte.

``tests/fixtures/receipts/<release>-<database>/`` holds every receipt a release wrote
(``scripts/release_fixtures.py`` run by that release's own interpreter, probes in its
sandbox): the stored body of each, its DSSE envelope when signed, and a manifest with the
signing key's public half. 681c6eb is the previous release (no confirmation, no refusals);
84f3b46 is the main branch this model replaced the dict on (confirmed, unconfirmed and
flaky refutations, sandbox refusals).
"""

from __future__ import annotations

import base64
import copy
import functools
import hashlib
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probe_service.canonical import canonical_json, sha256_of_json
from probe_service.errors import ReceiptInvalid
from probe_service.plans import (
    load_receipt,
    parse_receipt,
    parse_receipt_json,
    result_from_receipt,
    save_receipt,
    verify_receipt,
)
from probe_service.plans.receipt_model import CommittedV1
from probe_service.plans.receipt_schema import receipt_schema
from probe_service.plans.signing import public_key_from_pem, statement_for, verify_envelope
from probe_service.service import ProbeService
from probe_service.service.registry import operations


@functools.cache
def _validator(version: int) -> Any:
    """The published schema of ``version``, itself checked against its metaschema once
    (what ``jsonschema.validate`` redoes on every call)."""
    schema = receipt_schema(version)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "receipts"
RELEASES = sorted(p for p in FIXTURES.iterdir() if (p / "manifest.json").exists())
RECEIPTS = sorted(
    path
    for release in RELEASES
    for path in release.glob("*.json")
    if path.name not in ("manifest.json", "faces.json") and not path.name.endswith(".envelope.json")
)
ENVELOPES = sorted(path for release in RELEASES for path in release.glob("*.envelope.json"))


def _id(path: Path) -> str:
    return f"{path.parent.name}/{path.name.split('.')[0][:24]}"


def _manifest(path: Path) -> dict[str, Any]:
    manifest: dict[str, Any] = json.loads((path.parent / "manifest.json").read_text())
    return manifest


def test_the_fixtures_are_there() -> None:
    """Both releases' receipts are present, from SQLite and from PostgreSQL."""
    assert {p.name for p in RELEASES} == {"681c6eb-sqlite", "681c6eb-postgresql", "84f3b46-sqlite"}
    assert len(RECEIPTS) >= 36
    assert len(ENVELOPES) >= 33


@pytest.mark.parametrize("path", RECEIPTS, ids=_id)
class TestEachStoredReceipt:
    def test_reads_back_to_the_stored_bytes(self, path: Path) -> None:
        """Read into the model of its version and written out as the store writes a body,
        the receipt is the stored text, byte for byte."""
        body = path.read_text(encoding="utf-8")
        receipt = parse_receipt_json(body)
        assert json.dumps(receipt.to_json(), sort_keys=True) == body

    def test_the_commitment_rehashes_to_the_same_sha256(self, path: Path) -> None:
        """The canonical bytes of the typed committed fields hash to the receipt's sha256,
        the sha the release reported (the manifest, or the file's own name)."""
        receipt = parse_receipt_json(path.read_text(encoding="utf-8"))
        name = path.name.removesuffix(".json")
        expected = _manifest(path)["receipts"].get(name, name)
        canonical = canonical_json(receipt.committed.to_json())
        assert hashlib.sha256(canonical).hexdigest() == receipt.receipt_sha256 == expected
        assert receipt.field_digests == {
            key: sha256_of_json(value) for key, value in receipt.committed.to_json().items()
        }

    def test_verifies(self, path: Path) -> None:
        """The stored document verifies offline, kept output against its digests."""
        document = json.loads(path.read_text(encoding="utf-8"))
        assert verify_receipt(document) == document["receipt_sha256"]

    def test_matches_the_published_schema(self, path: Path) -> None:
        """The document is valid under schemas/receipt-v1.schema.json."""
        document = json.loads(path.read_text(encoding="utf-8"))
        _validator(document["committed"]["version"]).validate(document)


@pytest.mark.parametrize("path", ENVELOPES, ids=_id)
def test_each_envelope_verifies_and_is_rebuilt_from_the_typed_receipt(path: Path) -> None:
    """The envelope's signature verifies with the release's public key, and the statement
    the typed receipt makes now is the signed payload, byte for byte."""
    manifest = _manifest(path)
    envelope = json.loads(path.read_text(encoding="utf-8"))
    key = public_key_from_pem(manifest["public_key"], "manifest")
    verified = verify_envelope(envelope, [key])
    assert verified.signer == manifest["keyid"]
    receipt_path = path.with_name(path.name.replace(".envelope.json", ".json"))
    receipt = parse_receipt_json(receipt_path.read_text(encoding="utf-8"))
    assert verified.receipt_sha256 == receipt.receipt_sha256
    assert canonical_json(statement_for(receipt)) == base64.b64decode(envelope["payload"])


def _carried(release: str) -> tuple[set[str], set[str]]:
    committed: set[str] = set()
    operational: set[str] = set()
    for path in RECEIPTS:
        if path.parent.name.startswith(release):
            document = json.loads(path.read_text(encoding="utf-8"))
            committed |= set(document["committed"])
            operational |= set(document["operational"])
    return committed, operational


class TestTheFixturesCoverEveryShape:
    def test_the_previous_release_wrote_no_confirmation_nor_refusals(self) -> None:
        """681c6eb's receipts carry toolchains, preflight, JUnit and signers, never the
        fields later releases added, and its limits lack the later limits."""
        committed, operational = _carried("681c6eb")
        assert {"toolchains", "preflight", "junit", "signer"} <= committed
        assert not {"refusals", "confirmation"} & committed
        assert {"preflight_output", "junit_output", "possible_sandbox_denial"} <= operational
        supports = json.loads((FIXTURES / "681c6eb-sqlite" / "supports.json").read_text())
        assert "max_open_files" not in supports["committed"]["limits_applied"]

    def test_main_wrote_every_optional_field(self) -> None:
        """84f3b46's receipts carry every optional committed and operational field."""
        committed, operational = _carried("84f3b46")
        optional = {"toolchains", "preflight", "junit", "refusals", "confirmation", "signer"}
        assert optional <= committed
        assert {"confirmation", "preflight_output", "junit_output"} <= operational
        states = {
            json.loads(p.read_text())["committed"].get("confirmation", {}).get("state")
            for p in RECEIPTS
            if p.parent.name.startswith("84f3b46")
        }
        assert {"confirmed", "unconfirmed", "disagreed"} <= states

    def test_signed_and_unsigned(self) -> None:
        """Some receipts name a key as signer, the first of each release says unsigned."""
        for release in RELEASES:
            supports = [release / "supports.json", release / "supports_signed.json"]
            signers = {json.loads(p.read_text())["committed"]["signer"] for p in supports}
            assert signers == {"unsigned", _manifest(release / "manifest.json")["keyid"]}


def _fixture(name: str = "84f3b46-sqlite/refutes.json") -> dict[str, Any]:
    document: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return copy.deepcopy(document)


class TestRefusedWhenNotAReceiptThisReleaseReads:
    @pytest.mark.parametrize("version", [0, 3, 99, "1", 1.0, True, None])
    def test_an_unknown_version(self, version: object) -> None:
        """A version this release has no model for is refused, naming committed.version."""
        document = _fixture()
        document["committed"]["version"] = version
        with pytest.raises(ReceiptInvalid, match=r"committed\.version .* not a receipt version"):
            parse_receipt(document)

    @pytest.mark.parametrize("field", ["plan", "outcome", "elapsed_us", "limits_applied"])
    def test_a_missing_committed_field(self, field: str) -> None:
        """A committed field removed is refused, naming it."""
        document = _fixture()
        del document["committed"][field]
        with pytest.raises(ReceiptInvalid, match=rf"committed\.{field}: Field required"):
            parse_receipt(document)

    @pytest.mark.parametrize(
        ("where", "key"),
        [((), "trusted"), (("confirmation",), "by"), (("limits_applied",), "gpu_seconds")],
    )
    def test_an_extra_committed_field(self, where: tuple[str, ...], key: str) -> None:
        """A committed field version 1 does not have, at any depth, is refused naming it."""
        document = _fixture()
        part = document["committed"]
        for step in where:
            part = part[step]
        part[key] = True
        path = ".".join(("committed", *where, key))
        with pytest.raises(ReceiptInvalid, match=rf"{path}: .*not a field"):
            parse_receipt(document)

    @pytest.mark.parametrize(
        ("field", "value"),
        [("exit_code", 1.0), ("exit_code", True), ("signer", None), ("toolchains", None)],
    )
    def test_a_value_not_read_back_as_written(self, field: str, value: object) -> None:
        """A value the model would have to coerce, or a null where a field is absent when
        missing, is refused naming the field: nothing is committed that was not written."""
        document = _fixture("84f3b46-sqlite/toolchain_junit.json")
        document["committed"][field] = value
        with pytest.raises(ReceiptInvalid, match=rf"committed\.{field}"):
            parse_receipt(document)

    def test_an_operational_field_it_does_not_know_is_kept(self) -> None:
        """Outside the commitment, a key a later release adds is kept as written."""
        document = _fixture()
        document["operational"]["queue_wait_seconds"] = 3.5
        assert parse_receipt(document).to_json() == document


MAIN = FIXTURES / "84f3b46-sqlite"
#: What 84f3b46's operation table dumped for each of its receipts (scripts/release_faces.py).
FACES: dict[str, dict[str, str]] = json.loads((MAIN / "faces.json").read_text())


@pytest.fixture(scope="module")
def faces_now(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    """The same dumps made by this release, over the same stored bodies."""
    ops = {op.name: op for op in operations()}
    found: dict[str, dict[str, str]] = {}
    root = tmp_path_factory.mktemp("faces")
    with ProbeService.open(root) as svc:
        for name in FACES:
            receipt = parse_receipt_json((MAIN / f"{name}.json").read_text(encoding="utf-8"))
            save_receipt(svc.store, f"run-{name}", receipt, False)
        for name in FACES:
            sha = json.loads((MAIN / f"{name}.json").read_text())["receipt_sha256"]
            shown = svc.receipt_get(receipt_id=sha)
            result = result_from_receipt(f"run-{name}", load_receipt(svc.store, sha))
            dumped = ops["probe_run"].dump(result)
            # A field the result gained since (docs/ARCHITECTURE.md, "Reuse explained") is
            # new text beside the old; every older field and the receipt keep their bytes.
            assert dumped.pop("reuse")["why"] == "not_recorded"
            # So is the probe's memory peak, which that release never recorded.
            got = ops["receipt_get"].dump(shown)
            assert (dumped.pop("memory_peak_bytes"), got.pop("memory_peak_bytes")) == (None, None)
            found[name] = {
                "receipt_get": json.dumps(got),
                "probe_run": json.dumps(dumped),
            }
    return found


@pytest.mark.parametrize("name", sorted(FACES))
def test_every_face_returns_the_same_json_text(
    name: str, faces_now: dict[str, dict[str, str]]
) -> None:
    """``receipt_get`` and a run's result carry the receipt exactly as the dict-based
    release dumped it, byte for byte (values, keys and their order)."""
    assert faces_now[name] == FACES[name]


_OPTIONAL = [*sorted(CommittedV1.absent_when_none), "scratch_inodes", "max_open_files"]


class TestPresenceProperty:
    @settings(max_examples=60, deadline=None)
    @given(
        path=st.sampled_from(RECEIPTS),
        dropped=st.sets(st.sampled_from(_OPTIONAL)),
        extra_op=st.dictionaries(st.sampled_from(["note", "queue_wait_seconds"]), st.integers()),
    )
    def test_any_presence_of_optional_fields_reads_back_as_written(
        self, path: Path, dropped: set[str], extra_op: dict[str, int]
    ) -> None:
        """Whichever optional fields a receipt carries, and whatever operational keys a
        later release added, it reads back to exactly its own JSON."""
        document = json.loads(path.read_text(encoding="utf-8"))
        committed = document["committed"]
        for key in dropped:
            committed.pop(key, None)
            if isinstance(committed.get("limits_applied"), dict):
                committed["limits_applied"].pop(key, None)
        document["operational"].update(extra_op)
        assert parse_receipt(document).to_json() == document
