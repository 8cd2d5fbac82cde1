"""Claims and gates use signatures: evidence and rechecks record the signer;
``gate --require-signed`` refuses receipts not signed by a given key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import insert, select

from probe_service.claims import (
    change_analyze,
    claim_create,
    claim_show,
    gate,
    obligation_resolve,
    store_receipts,
)
from probe_service.cli import main
from probe_service.plans.persist import load_envelope
from probe_service.plans.signing import SigningKey, create_key_pair, load_signing_key
from probe_service.plans.tables import receipt_signatures, receipts
from probe_service.store import Store

from .. import calls as service
from .helpers import PARSE_PY, WorkTree, claim_request, stored_receipt


@pytest.fixture
def keys(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[SigningKey, Path]]:
    """Two key pairs (signing key, public key file) outside any repository or store."""
    pairs = []
    for name in ("old", "new"):
        private, public, _ = create_key_pair(tmp_path_factory.mktemp(name))
        pairs.append((load_signing_key(private), public))
    return pairs


def signed_claim(tree: WorkTree, key: SigningKey | None) -> tuple[str, str, str]:
    """A claim on a receipt signed by ``key`` (unsigned if None); (claim, snapshot, receipt)."""
    snap = tree.write("src/parse.py", PARSE_PY).capture()
    run_id = f"run-{snap[:12]}"
    receipt = stored_receipt(tree.store, "supports", snap, run_id=run_id, signing_key=key)
    request = claim_request(snap, evidence=[{"receipt": receipt}])
    record = claim_create(tree.store, request, receipts=store_receipts(tree.store))
    return record.claim_id, snap, receipt


class TestEvidenceRecordsSigner:
    def test_signed_and_unsigned_evidence(
        self, any_store: Store, tmp_path: Path, keys: list[tuple[SigningKey, Path]]
    ) -> None:
        """Receipt evidence records the signer's fingerprint, or "unsigned"."""
        root = tmp_path / "w"
        root.mkdir()
        tree = WorkTree(root, any_store)
        signed, _, _ = signed_claim(tree, keys[0][0])
        unsigned, _, _ = signed_claim(tree.write("src/other.py", "y = 2\n"), None)
        (ev,) = claim_show(any_store, signed).evidence
        assert ev.receipt_signer == keys[0][0].fingerprint
        (ev,) = claim_show(any_store, unsigned).evidence
        assert ev.receipt_signer == "unsigned"

    def test_rechecked_resolution_records_signer(
        self, tree: WorkTree, keys: list[tuple[SigningKey, Path]]
    ) -> None:
        """A rechecked resolution keeps the fingerprint that signed its receipt."""
        _, start, _ = signed_claim(tree, keys[0][0])
        end = tree.write("src/parse.py", "def parse(t):\n    return t\n").capture()
        opened = change_analyze(tree.store, start, end).opened[0]
        again = stored_receipt(tree.store, "supports", end, run_id="again", signing_key=keys[1][0])
        done = obligation_resolve(tree.store, opened.obligation_id, "rechecked", "ran it",
                                  receipt=again, receipts=store_receipts(tree.store))  # fmt: skip
        assert done.receipt_signer == keys[1][0].fingerprint


class TestGateRequireSigned:
    def test_gate_accepts_any_given_key_and_refuses_others(
        self, any_store: Store, tmp_path: Path, keys: list[tuple[SigningKey, Path]]
    ) -> None:
        """Signed by one of the given keys (file or fingerprint) passes; another key or no
        signature fails, naming the claim and the receipt."""
        root = tmp_path / "w"
        root.mkdir()
        tree = WorkTree(root, any_store)
        (old, old_public), (_, new_public) = keys
        claim_id, snap, receipt = signed_claim(tree, old)
        for accepted in ([str(new_public), str(old_public)], [old.fingerprint]):
            check = service.signature_requirement(any_store, accepted)
            assert gate(any_store, snap, require_signed=check).passed
        result = gate(any_store, snap, require_signed=service.signature_requirement(
            any_store, [str(new_public)]))  # fmt: skip
        assert not result.passed
        (why,) = result.unsigned_evidence
        assert f"claim {claim_id}: receipt {receipt}" in why
        assert "not by a given key" in why or "not by a required key" in why
        assert gate(any_store, snap).passed  # without --require-signed, nothing changes

    def test_unsigned_and_revoked_refused(
        self,
        tree: WorkTree,
        keys: list[tuple[SigningKey, Path]],
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """Unsigned evidence fails the gate; a key revoked in the policy file counts as
        unsigned even when its public key is given."""
        (old, old_public), _ = keys
        _, snap, _ = signed_claim(tree, old)
        policy_file = tmp_path / "policies.json"
        policy_file.write_text(json.dumps({
            "schema": 2, "revoked_signing_keys": [old.fingerprint],
            "policies": [{"id": "p", "allowed_executables": ["true"], "timeout_seconds": 1,
                          "max_output_bytes": 10, "allowed_domains": [], "environment": []}],
        }))  # fmt: skip
        monkeypatch.setenv("BYTE_PROBE_POLICY_FILE", str(policy_file))
        result = gate(tree.store, snap, require_signed=service.signature_requirement(
            tree.store, [str(old_public)]))  # fmt: skip
        assert not result.passed
        assert "revoked" in result.unsigned_evidence[0]
        unsigned_snap = tree.write("src/u.py", "z = 3\n").capture()
        receipt = stored_receipt(tree.store, "supports", unsigned_snap, run_id="u")
        claim_create(tree.store, claim_request(unsigned_snap, evidence=[{"receipt": receipt}]),
                     receipts=store_receipts(tree.store))  # fmt: skip
        monkeypatch.delenv("BYTE_PROBE_POLICY_FILE")
        result = gate(tree.store, unsigned_snap, require_signed=service.signature_requirement(
            tree.store, [str(old_public)]))  # fmt: skip
        assert any(why.endswith(f"receipt {receipt}: unsigned") for why in result.unsigned_evidence)

    def test_envelope_copied_onto_another_receipt_refused(
        self, any_store: Store, tmp_path: Path, keys: list[tuple[SigningKey, Path]]
    ) -> None:
        """A valid envelope copied from a signed receipt onto an unsigned one does not make
        it signed: the gate refuses it as an envelope for another receipt."""
        root = tmp_path / "w"
        root.mkdir()
        tree = WorkTree(root, any_store)
        old, old_public = keys[0]
        _, _, signed = signed_claim(tree, old)
        _, snap, unsigned = signed_claim(tree.write("src/u.py", "z = 3\n"), None)
        envelope = load_envelope(any_store, signed)
        with any_store.transaction() as conn:  # the forgery: insert-only allows a new row
            run_id = conn.execute(
                select(receipts.c.run_id).where(receipts.c.receipt_sha256 == unsigned)
            ).scalar_one()
            conn.execute(insert(receipt_signatures).values(
                run_id=run_id, receipt_sha256=unsigned, keyid=old.fingerprint,
                envelope=json.dumps(envelope), created_at="2026-01-01T00:00:00Z"))  # fmt: skip
        result = gate(any_store, snap, require_signed=service.signature_requirement(
            any_store, [str(old_public)]))  # fmt: skip
        assert not result.passed
        refused = [why for why in result.unsigned_evidence if f"receipt {unsigned}" in why]
        assert refused
        assert "another receipt" in refused[0]

    def test_cli_gate_require_signed_exits_1_naming_receipt(
        self,
        tree: WorkTree,
        keys: list[tuple[SigningKey, Path]],
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        """`gate --require-signed KEY` exits 1 and prints the refused receipt."""
        _, new_public = keys[1]
        _, snap, receipt = signed_claim(tree, keys[0][0])
        code = main(["gate", "--snapshot", snap, "--require-signed", str(new_public),
                     "--root", str(tree.store.root)])  # fmt: skip
        out, _ = capsys.readouterr()
        assert code == 1
        assert "not signed by a required key: claim" in out
        assert receipt in out
