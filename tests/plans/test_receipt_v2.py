"""Receipt version 2: a JUnit report's cases committed by the digest of their canonical
list, the list stored as a blob and checked against it (docs/ARCHITECTURE.md, "JUnit
oracle"). The stub sandbox leaves the report: these tests are about the receipt."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from probe_service.canonical import canonical_json, sha256_hex
from probe_service.errors import ReceiptInvalid
from probe_service.plans import (
    build_receipt,
    receipt_cases,
    verify_receipt,
    verify_stored_receipt,
)
from probe_service.plans.case_lists import load_case_list
from probe_service.plans.receipt_model import CommittedV2, Operational, Receipt, ReceiptV2
from probe_service.plans.receipt_parts import JunitV2
from probe_service.snapshot.blobs import read_blob
from probe_service.store import Store

from ..calls import probe_plan as create_plan
from ..calls import probe_run, snapshot_capture
from ..stubsandbox import Canned, StubSandbox

POLICY_ID = "junit-v2"


def _report(cases: int, failing_every: int) -> bytes:
    body = b"".join(
        (
            b"<testcase classname='m' name='t%d' time='0.5'><failure message='m%d'/>"
            b"<system-out>out %d</system-out></testcase>" % (i, i, i)
            if i % failing_every == 0
            else b"<testcase classname='m' name='t%d' time='0.5'/>" % i
        )
        for i in range(cases)
    )
    return b"<testsuites><testsuite>" + body + b"</testsuite></testsuites>"


def _policy_file(directory: Path, **keys: object) -> Path:
    path = directory / "policies.json"
    policy = {
        "id": POLICY_ID,
        "allowed_executables": ["python3"],
        "timeout_seconds": 20,
        "max_output_bytes": 10_000,
        "allowed_domains": [],
        "environment": [],
        **keys,
    }
    path.write_text(json.dumps({"schema": 3, "policies": [policy]}))
    path.chmod(0o600)
    return path


def _run(
    store: Store, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, report: bytes,
    **keys: object,
) -> Receipt:  # fmt: skip
    monkeypatch.setenv("BYTE_PROBE_POLICY_FILE", str(_policy_file(tmp_path, **keys)))
    (repo / "data.txt").write_text("data\n")
    doc = {
        "snapshot_id": snapshot_capture(store, repo).snapshot_id,
        "policy_id": POLICY_ID,
        "executable": "python3",
        "args": ["-c", "pass"],
        "oracle": {
            "check": {"kind": "junit_xml", "path": "out/report.xml"},
            "source": "user_requirement",
            "reference": "issue #29",
        },
    }
    plan_id = create_plan(store, doc).plan_id
    stub = StubSandbox(Canned(exit_code=1, scratch_files={"out/report.xml": report}))
    return probe_run(store, plan_id, POLICY_ID, backend=stub).receipt


class TestAJunitRunWritesVersion2:
    def test_the_case_list_is_committed_by_digest_and_stored(
        self, sqlite_store: Store, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The receipt is version 2; its committed junit names the case list's digest, not
        the cases; the stored blob of that digest is every case, and it verifies."""
        receipt = _run(sqlite_store, repo, tmp_path, monkeypatch, _report(500, 50))
        assert isinstance(receipt, ReceiptV2)
        junit = receipt.committed.junit
        assert isinstance(junit, JunitV2)
        assert (junit.tests, junit.failed, junit.passed) == (500, 10, 490)
        assert "cases" not in receipt.committed.to_json()["junit"]
        data = read_blob(sqlite_store, junit.cases_sha256)
        assert sha256_hex(data) == junit.cases_sha256
        assert len(json.loads(data)) == 500
        assert [c.id for c in junit.not_passed] == [f"m::t{i}" for i in range(0, 500, 50)]
        assert verify_stored_receipt(sqlite_store, receipt) == receipt.receipt_sha256
        cases = receipt_cases(sqlite_store, receipt)
        assert cases is not None
        assert len(cases) == 500
        kept = receipt.operational.junit_output or ()
        assert [o.system_out for o in kept][:2] == ["out 0", "out 50"]

    def test_a_report_over_the_policys_cap_is_inconclusive_naming_cap_and_size(
        self, sqlite_store: Store, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """junit_max_cases below the suite: inconclusive (oracle_error), the detail naming
        the cap and the count, and no case list committed."""
        receipt = _run(
            sqlite_store, repo, tmp_path, monkeypatch, _report(30, 10), junit_max_cases=20
        )
        committed = receipt.committed
        assert (committed.outcome, committed.reason) == ("inconclusive", "oracle_error")
        assert committed.check is not None
        assert committed.check.detail == (
            "out/report.xml: the report holds 30 test cases, over the policy's "
            "junit_max_cases cap of 20"
        )
        assert committed.junit is None


class TestVerifyingAVersion2Receipt:
    @pytest.fixture
    def receipt(
        self, sqlite_store: Store, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> ReceiptV2:
        made = _run(sqlite_store, repo, tmp_path, monkeypatch, _report(40, 4))
        assert isinstance(made, ReceiptV2)
        return made

    def test_a_changed_case_list_is_refused_naming_the_digest(
        self, sqlite_store: Store, receipt: ReceiptV2
    ) -> None:
        """One outcome changed in the list: it no longer matches cases_sha256."""
        junit = receipt.committed.junit
        assert junit is not None
        cases = json.loads(load_case_list(sqlite_store, junit))
        cases[1]["outcome"] = "failed"
        with pytest.raises(ReceiptInvalid, match=r"committed\.junit\.cases_sha256: .*digest"):
            verify_receipt(receipt, canonical_json(cases))

    def test_counts_that_disagree_with_the_list_are_refused_naming_the_count(
        self, sqlite_store: Store, receipt: ReceiptV2
    ) -> None:
        """A receipt re-committed with one failure fewer (its digests recomputed, the list
        unchanged) verifies alone but not against its case list."""
        junit = receipt.committed.junit
        assert junit is not None
        fewer = junit.model_copy(update={"failed": junit.failed - 1, "passed": junit.passed + 1})
        forged = build_receipt(
            receipt.committed.model_copy(update={"junit": fewer}), receipt.operational
        )
        assert verify_receipt(forged) == forged.receipt_sha256
        with pytest.raises(ReceiptInvalid, match=r"committed\.junit\.passed: the case list says"):
            verify_stored_receipt(sqlite_store, forged)

    def test_a_hidden_failure_is_refused_naming_not_passed(
        self, sqlite_store: Store, receipt: ReceiptV2
    ) -> None:
        """The first failing cases committed must be the list's: dropping one is found."""
        junit = receipt.committed.junit
        assert junit is not None
        hidden = junit.model_copy(update={"not_passed": junit.not_passed[1:]})
        forged = build_receipt(
            receipt.committed.model_copy(update={"junit": hidden}), receipt.operational
        )
        with pytest.raises(ReceiptInvalid, match=r"committed\.junit\.not_passed"):
            verify_stored_receipt(sqlite_store, forged)

    def test_a_case_list_not_stored_is_refused_naming_its_digest(
        self, sqlite_store: Store, receipt: ReceiptV2
    ) -> None:
        """A receipt naming a case list this store never held does not verify here."""
        junit = receipt.committed.junit
        assert junit is not None
        elsewhere = junit.model_copy(update={"cases_sha256": "f" * 64})
        committed = receipt.committed.model_copy(update={"junit": elsewhere})
        forged = build_receipt(committed, receipt.operational)
        with pytest.raises(ReceiptInvalid, match=f"case list {'f' * 64} is not stored"):
            verify_stored_receipt(sqlite_store, forged)

    def test_a_case_list_for_a_receipt_without_one_is_refused(
        self, sqlite_store: Store, receipt: ReceiptV2
    ) -> None:
        """Offered a case list, a receipt that commits to none does not verify."""
        plain = build_receipt(receipt.committed.model_copy(update={"junit": None}), Operational())
        assert isinstance(plain.committed, CommittedV2)
        with pytest.raises(ReceiptInvalid, match="commits to none"):
            verify_receipt(plain, b"[]")
