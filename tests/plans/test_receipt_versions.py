"""Receipt versions: the published schema of each is current, and a later version is a new
model beside version 1 (docs/ARCHITECTURE.md, "Receipts")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar, Literal, get_args

import pytest

from probe_service.canonical import sha256_of_json
from probe_service.errors import ReceiptInvalid
from probe_service.plans import (
    build_receipt,
    find_reusable_receipt,
    load_receipt,
    parse_receipt,
    save_receipt,
    verify_receipt,
)
from probe_service.plans.receipt_model import (
    RECEIPT_VERSION,
    RECEIPT_VERSIONS,
    Committed,
    CommittedV1,
    Operational,
    Receipt,
    ReceiptV1,
)
from probe_service.plans.receipt_parts import Str
from probe_service.plans.receipt_schema import main, render_receipt_schema, schema_path
from probe_service.policies.model import PolicyFile
from probe_service.service import ProbeService
from probe_service.store import Store
from probe_service.store.migrate import schema_head

from ..receipt_fields import committed_fields

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "receipts" / "84f3b46-sqlite"


class TestPublishedSchemas:
    @pytest.mark.parametrize("version", sorted(RECEIPT_VERSIONS))
    def test_each_version_has_a_current_schema_file(self, version: int) -> None:
        """schemas/receipt-v<N>.schema.json equals the schema generated from the model
        (regenerate: python -m probe_service.plans.receipt_schema --write)."""
        assert schema_path(version).read_text(encoding="utf-8") == render_receipt_schema(version)

    def test_the_check_command_finds_no_stale_file(self) -> None:
        """The command a developer runs agrees: nothing is stale."""
        assert main(["--check"]) == 0

    def test_committed_parts_forbid_keys_and_operational_ones_keep_them(self) -> None:
        """The schema says what the parser does: additionalProperties false under the
        commitment, open in the operational part."""
        defs = json.loads(render_receipt_schema(1))["$defs"]
        assert defs["CommittedV1"]["additionalProperties"] is False
        assert defs["Limits"]["additionalProperties"] is False
        assert defs["Operational"]["additionalProperties"] is True


class CommittedV3(Committed):
    """A stand-in for a version after this release's newest: one more committed field."""

    version: Literal[3]
    later_sha256: Str | None


class ReceiptV3(Receipt):
    committed_model: ClassVar[type[Committed]] = CommittedV3
    committed: CommittedV3


def _v3_document() -> dict[str, object]:
    committed = {**committed_fields(), "version": 3, "later_sha256": "e" * 64}
    return {
        "receipt_sha256": sha256_of_json(committed),
        "committed": committed,
        "field_digests": {k: sha256_of_json(v) for k, v in committed.items()},
        "operational": {},
    }


class TestALaterVersionIsANewModel:
    def test_without_its_model_a_later_version_is_refused(self) -> None:
        """This release reads versions 1 and 2: a version-3 receipt is refused, named."""
        with pytest.raises(ReceiptInvalid, match=r"committed\.version 3 is not a receipt"):
            parse_receipt(_v3_document())

    def test_added_beside_version_1_both_read(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Registered beside the others, a version-3 receipt reads into its model and
        verifies; the stored version-1 receipts read and hash exactly as before."""
        monkeypatch.setitem(RECEIPT_VERSIONS, 3, ReceiptV3)
        v3 = parse_receipt(_v3_document())
        assert isinstance(v3, ReceiptV3)
        assert v3.committed.later_sha256 == "e" * 64
        assert verify_receipt(v3) == v3.receipt_sha256
        for path in FIXTURE.glob("*.json"):
            if path.name in ("manifest.json", "faces.json") or path.name.endswith(".envelope.json"):
                continue
            body = path.read_text(encoding="utf-8")
            v1 = parse_receipt(json.loads(body))
            assert isinstance(v1, ReceiptV1)
            assert json.dumps(v1.to_json(), sort_keys=True) == body

    def test_a_version_1_receipt_cannot_carry_a_later_field(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The field belongs to version 3: under version 1 it is refused, named."""
        monkeypatch.setitem(RECEIPT_VERSIONS, 3, ReceiptV3)
        document = _v3_document()
        document["committed"] = {**document["committed"], "version": 1}
        with pytest.raises(ReceiptInvalid, match=r"committed\.later_sha256: .*not a field"):
            parse_receipt(document)

    def test_build_refuses_a_version_it_does_not_write(self) -> None:
        """build_receipt writes only the versions this release has models for."""
        committed = CommittedV3.model_validate(_v3_document()["committed"])
        with pytest.raises(ReceiptInvalid, match="version 3"):
            build_receipt(committed, Operational())

    def test_version_1_models_are_what_callers_type_against(self) -> None:
        """CommittedV1 is a Committed and ReceiptV1 a Receipt, so callers typed against the
        base read every version's common fields."""
        assert issubclass(CommittedV1, Committed)
        assert issubclass(ReceiptV1, Receipt)
        assert RECEIPT_VERSIONS[1] is ReceiptV1


def test_capabilities_report_the_versions_this_release_uses(tmp_path: Path) -> None:
    """capabilities names the receipt version written, the newest policy schema the loader
    reads (it said 2 after schema 3 landed) and the store's head."""
    with ProbeService.open(tmp_path, lazy=True) as svc:
        versions = svc.capabilities().schema_versions
    read = get_args(PolicyFile.model_fields["schema_version"].annotation)
    assert versions["receipt"] == RECEIPT_VERSION == max(RECEIPT_VERSIONS)
    assert versions["policy_file"] == max(read) == 3
    assert versions["store"] == schema_head()


def test_an_older_reader_never_reuses_a_later_version(
    any_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A version-3 receipt stored reusable (by a newer worker of the farm) answers its
    action key only where version 3 is read; elsewhere the run executes, and showing the
    receipt is refused naming its version."""
    with monkeypatch.context() as newer:
        newer.setitem(RECEIPT_VERSIONS, 3, ReceiptV3)
        receipt = parse_receipt(_v3_document())
        assert save_receipt(any_store, "run-v3", receipt, reusable=True)
        assert find_reusable_receipt(any_store, receipt.committed.action_key) == receipt
    assert find_reusable_receipt(any_store, receipt.committed.action_key) is None
    with pytest.raises(ReceiptInvalid, match=r"committed\.version 3 is not a receipt version"):
        load_receipt(any_store, "run-v3")
