"""Signed receipts: keys, DSSE envelopes of in-toto statements, offline verification."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from sqlalchemy import func, select, text
from sqlalchemy.exc import DBAPIError

from probe_service.canonical import canonical_json
from probe_service.errors import KeyFileError, NotFound, PolicyError, ReceiptInvalid
from probe_service.plans import Receipt, parse_plan, probe_abandon, save_plan
from probe_service.plans.persist import load_envelope, load_receipt
from probe_service.plans.signing import (
    PAYLOAD_TYPE,
    SigningKey,
    configured_signing_key,
    create_key_pair,
    dsse_pae,
    load_public_key,
    load_signing_key,
    receipt_signer,
    sign_receipt,
    verify_envelope,
)
from probe_service.plans.tables import receipt_signatures, receipts
from probe_service.policies import PolicyFile, load_policy_file, policy_digest
from probe_service.service import ProbeService
from probe_service.settings import read_settings
from probe_service.store import Store

from .. import calls as service
from .conftest import TEST_POLICY as POLICY
from .conftest import plan_doc

POLICY_FILE = PolicyFile.model_validate({"schema": 1, "policies": [POLICY]})


def _capabilities() -> dict[str, Any]:
    """The ``capabilities`` row's JSON from a session that opens no store."""
    return dict(ProbeService(open_store=_no_store).call("capabilities"))


def _no_store() -> Store:
    raise AssertionError("capabilities opened the store")


@pytest.fixture
def key_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory outside any store root or repository."""
    return tmp_path_factory.mktemp("keys")


@pytest.fixture
def key_pair(key_dir: Path) -> tuple[SigningKey, Path]:
    private, public, _ = create_key_pair(key_dir)
    return load_signing_key(private), public


def abandoned(store: Store, key: SigningKey | None, run_id: str = "r1") -> Receipt:
    """A real receipt written by the run code (a refused run: no probe is launched)."""
    plan_id, _ = save_plan(store, parse_plan(plan_doc()))
    result = probe_abandon(
        store,
        plan_id,
        "test-policy",
        policy_file=POLICY_FILE,
        run_id=run_id,
        reason="worker_lost",
        detail="test",
        worker="w",
        signing_key=key,
    )
    return result.receipt


def count(store: Store, table: Any) -> int:
    with store.reading() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


class TestKeys:
    def test_create_writes_owner_only_key_and_fingerprint(self, key_dir: Path) -> None:
        """`key create` writes a 0600 private key, a public key beside it, and the keyid is
        the hex SHA-256 of the raw public key bytes."""
        private, public, fingerprint = create_key_pair(key_dir)
        assert private.stat().st_mode & 0o777 == 0o600
        key = serialization.load_pem_public_key(public.read_bytes())
        assert isinstance(key, Ed25519PublicKey)
        raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        assert fingerprint == hashlib.sha256(raw).hexdigest()
        assert load_signing_key(private).fingerprint == fingerprint

    def test_create_refuses_to_overwrite(self, key_dir: Path) -> None:
        """A second `key create` into the same directory is refused, the key kept."""
        private, _, _ = create_key_pair(key_dir)
        before = private.read_bytes()
        with pytest.raises(KeyFileError, match="already exists"):
            create_key_pair(key_dir)
        assert private.read_bytes() == before

    def test_loose_permissions_refused(self, key_dir: Path) -> None:
        """A private key readable by group or others is refused, naming the file."""
        private, _, _ = create_key_pair(key_dir)
        private.chmod(0o640)
        with pytest.raises(KeyFileError, match="group/other permissions") as info:
            load_signing_key(private)
        assert str(private) in str(info.value)

    def test_symlink_refused(self, key_dir: Path) -> None:
        """A private key reached through a symbolic link is refused."""
        private, _, _ = create_key_pair(key_dir)
        link = key_dir / "link.pem"
        link.symlink_to(private)
        with pytest.raises(KeyFileError, match="symbolic link"):
            load_signing_key(link)

    def test_key_in_repository_or_store_refused(self, key_dir: Path) -> None:
        """A key inside a git repository or under the store root is refused."""
        private, _, _ = create_key_pair(key_dir)
        with pytest.raises(KeyFileError, match="inside the store"):
            load_signing_key(private, forbidden_roots=(key_dir,))
        (key_dir / ".git").mkdir()
        with pytest.raises(KeyFileError, match="inside a repository"):
            load_signing_key(private)

    def test_configured_key_env_or_default(self, key_dir: Path, tmp_path: Path) -> None:
        """No env and no default file: unsigned (None); the env var names the key; a key
        beside the default policy file is found."""
        home = {"HOME": str(tmp_path)}
        assert configured_signing_key(read_settings(home)) is None
        private, _, fingerprint = create_key_pair(key_dir)
        named = read_settings({**home, "BYTE_PROBE_SIGNING_KEY": str(private)})
        found = configured_signing_key(named)
        assert found is not None
        assert found.fingerprint == fingerprint
        agent = tmp_path / ".zyte" / "agent"
        agent.mkdir(parents=True)
        os.link(private, agent / "signing-key.pem")
        found = configured_signing_key(read_settings(home))
        assert found is not None
        assert found.fingerprint == fingerprint


class TestSignedReceipts:
    def test_signed_receipt_names_key_and_stores_envelope(
        self, any_store: Store, key_pair: tuple[SigningKey, Path]
    ) -> None:
        """With a key, the receipt commits to its signer and a verifying envelope is stored
        beside it."""
        key, public = key_pair
        receipt = abandoned(any_store, key)
        assert receipt.committed.signer == key.fingerprint
        envelope = load_envelope(any_store, receipt.receipt_sha256)
        verified = verify_envelope(envelope, [load_public_key(public)])
        assert (verified.receipt_sha256, verified.signer) == (
            receipt.receipt_sha256,
            key.fingerprint,
        )
        assert count(any_store, receipt_signatures) == 1

    def test_unsigned_receipt_says_so(self, any_store: Store) -> None:
        """Without a key the receipt says "unsigned" and no envelope exists."""
        receipt = abandoned(any_store, None)
        assert receipt.committed.signer == "unsigned"
        assert receipt_signer(receipt) == "unsigned"
        with pytest.raises(NotFound, match="unsigned"):
            load_envelope(any_store, receipt.receipt_sha256)
        assert count(any_store, receipt_signatures) == 0

    def test_duplicate_delivery_keeps_one_envelope(
        self, any_store: Store, key_pair: tuple[SigningKey, Path]
    ) -> None:
        """A second receipt for the same run writes neither receipt nor envelope."""
        key, _ = key_pair
        abandoned(any_store, key)
        abandoned(any_store, key)
        assert (count(any_store, receipts), count(any_store, receipt_signatures)) == (1, 1)

    @pytest.mark.parametrize("statement", ["UPDATE receipt_signatures SET keyid = 'x'",
                                           "DELETE FROM receipt_signatures"])  # fmt: skip
    def test_stored_envelope_cannot_be_changed_or_deleted(
        self, any_store: Store, key_pair: tuple[SigningKey, Path], statement: str
    ) -> None:
        """Raw SQL UPDATE or DELETE of a stored envelope is refused by the database."""
        key, public = key_pair
        receipt = abandoned(any_store, key)
        with pytest.raises(DBAPIError, match="immutable"), any_store.engine.begin() as conn:
            conn.execute(text(statement))
        envelope = load_envelope(any_store, receipt.receipt_sha256)
        assert verify_envelope(envelope, [load_public_key(public)]).signer == key.fingerprint


def independent_verify(envelope: dict[str, Any], public_pem: bytes) -> dict[str, Any]:
    """Verification written from the DSSE, in-toto and Ed25519 specifications only:
    nothing from probe_service is used here."""
    key = serialization.load_pem_public_key(public_pem)
    assert isinstance(key, Ed25519PublicKey)
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    keyid = hashlib.sha256(raw).hexdigest()
    payload_type = envelope["payloadType"]
    body = base64.b64decode(envelope["payload"])
    pae = b"DSSEv1 %d %s %d %s" % (
        len(payload_type.encode()),
        payload_type.encode(),
        len(body),
        body,
    )
    (signature,) = [s for s in envelope["signatures"] if s["keyid"] == keyid]
    key.verify(base64.b64decode(signature["sig"]), pae)  # raises InvalidSignature
    statement = json.loads(body)
    assert payload_type == "application/vnd.in-toto+json"
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    predicate = statement["predicate"]
    committed = predicate["committed"]
    canonical = json.dumps(
        committed, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    ).encode()
    assert hashlib.sha256(canonical).hexdigest() == predicate["receipt_sha256"]
    subjects = {s["name"]: s["digest"]["sha256"] for s in statement["subject"]}
    assert subjects == {"snapshot": committed["snapshot_id"], "plan": committed["plan_id"]}
    return statement


class TestOfflineVerification:
    def test_third_party_verifier_needs_nothing_of_ours(
        self, sqlite_store: Store, key_pair: tuple[SigningKey, Path]
    ) -> None:
        """An envelope verifies with a verifier written against the specifications alone."""
        key, public = key_pair
        receipt = abandoned(sqlite_store, key)
        envelope = json.loads(json.dumps(load_envelope(sqlite_store, receipt.receipt_sha256)))
        statement = independent_verify(envelope, public.read_bytes())
        assert statement["predicate"]["receipt_sha256"] == receipt.receipt_sha256
        assert statement["predicate"]["committed"]["outcome"] == "inconclusive"

    def test_tampered_envelope_refused(
        self, sqlite_store: Store, key_pair: tuple[SigningKey, Path]
    ) -> None:
        """A payload changed after signing fails the signature check, naming it."""
        key, public = key_pair
        envelope = load_envelope(sqlite_store, abandoned(sqlite_store, key).receipt_sha256)
        statement = json.loads(base64.b64decode(envelope["payload"]))
        statement["predicate"]["committed"]["outcome"] = "supports"
        envelope["payload"] = base64.b64encode(canonical_json(statement)).decode()
        with pytest.raises(ReceiptInvalid, match="signature: does not verify"):
            verify_envelope(envelope, [load_public_key(public)])

    def test_wrong_key_refused(
        self,
        sqlite_store: Store,
        key_pair: tuple[SigningKey, Path],
        tmp_path_factory: pytest.TempPathFactory,
    ) -> None:
        """An envelope signed by another key is refused, naming the signer's keyid."""
        key, _ = key_pair
        _, other_public, _ = create_key_pair(tmp_path_factory.mktemp("other"))
        envelope = load_envelope(sqlite_store, abandoned(sqlite_store, key).receipt_sha256)
        with pytest.raises(ReceiptInvalid, match=f"signed by {key.fingerprint}, not by a given"):
            verify_envelope(envelope, [load_public_key(other_public)])

    def test_subject_mismatch_refused_even_when_signed(
        self, sqlite_store: Store, key_pair: tuple[SigningKey, Path]
    ) -> None:
        """A validly signed statement whose subject is not the receipt's snapshot is refused."""
        key, public = key_pair
        envelope = load_envelope(sqlite_store, abandoned(sqlite_store, key).receipt_sha256)
        statement = json.loads(base64.b64decode(envelope["payload"]))
        statement["subject"][0]["digest"]["sha256"] = "f" * 64
        payload = canonical_json(statement)
        forged = {
            "payloadType": PAYLOAD_TYPE,
            "payload": base64.b64encode(payload).decode(),
            "signatures": [
                {
                    "keyid": key.fingerprint,
                    "sig": base64.b64encode(key.sign(dsse_pae(PAYLOAD_TYPE, payload))).decode(),
                }
            ],
        }
        with pytest.raises(ReceiptInvalid, match="subject: snapshot digest does not match"):
            verify_envelope(forged, [load_public_key(public)])

    def test_receipt_naming_another_signer_refused(
        self,
        sqlite_store: Store,
        key_pair: tuple[SigningKey, Path],
        tmp_path_factory: pytest.TempPathFactory,
    ) -> None:
        """A receipt signed by one key but naming another as its signer is refused."""
        _, public = key_pair
        other, _, _ = create_key_pair(tmp_path_factory.mktemp("other"))
        receipt = abandoned(sqlite_store, load_signing_key(other))
        key, _ = key_pair
        envelope = sign_receipt(receipt, key)
        with pytest.raises(ReceiptInvalid, match="names signer"):
            verify_envelope(envelope, [load_public_key(public)])

    def test_commitment_checked_without_a_key(
        self, sqlite_store: Store, key_pair: tuple[SigningKey, Path]
    ) -> None:
        """Without keys only statement and commitment are checked: signer is None; a
        committed field changed without its receipt_sha256 is refused."""
        key, _ = key_pair
        envelope = load_envelope(sqlite_store, abandoned(sqlite_store, key).receipt_sha256)
        assert verify_envelope(envelope).signer is None
        statement = json.loads(base64.b64decode(envelope["payload"]))
        statement["predicate"]["committed"]["reason"] = "oracle_passed"
        envelope["payload"] = base64.b64encode(canonical_json(statement)).decode()
        with pytest.raises(ReceiptInvalid, match="commitment: receipt_sha256"):
            verify_envelope(envelope)


class TestRotation:
    def test_any_of_several_keys_and_receipts_keep_their_signer(
        self,
        sqlite_store: Store,
        key_pair: tuple[SigningKey, Path],
        tmp_path_factory: pytest.TempPathFactory,
    ) -> None:
        """Receipts signed by an old and a new key both verify with both keys given, each
        naming the key that signed it."""
        old, old_public = key_pair
        new_private, new_public, _ = create_key_pair(tmp_path_factory.mktemp("new"))
        new = load_signing_key(new_private)
        first = abandoned(sqlite_store, old, "r1")
        second = abandoned(sqlite_store, new, "r2")
        keys = [load_public_key(new_public), load_public_key(old_public)]
        signers = [
            verify_envelope(load_envelope(sqlite_store, r.receipt_sha256), keys).signer
            for r in (first, second)
        ]
        assert signers == [old.fingerprint, new.fingerprint]
        assert load_receipt(sqlite_store, "r1").committed.signer == old.fingerprint

    def test_revoked_key_counts_as_unsigned(
        self, sqlite_store: Store, key_pair: tuple[SigningKey, Path]
    ) -> None:
        """A revoked fingerprint never verifies and its receipts count as unsigned."""
        key, public = key_pair
        receipt = abandoned(sqlite_store, key)
        envelope = load_envelope(sqlite_store, receipt.receipt_sha256)
        with pytest.raises(ReceiptInvalid, match="revoked"):
            verify_envelope(envelope, [load_public_key(public)], revoked=[key.fingerprint])
        assert receipt_signer(receipt, revoked=[key.fingerprint]) == "unsigned"
        assert receipt_signer(receipt) == key.fingerprint


class TestPolicyRevocations:
    def test_schema_2_file_level_list_counts_in_digest(self) -> None:
        """revoked_signing_keys (schema 2, file level) changes every policy's digest; an
        empty list keeps the digest a file without it has."""
        plain = PolicyFile.model_validate({"schema": 2, "policies": [POLICY]})
        empty = PolicyFile.model_validate(
            {"schema": 2, "policies": [POLICY], "revoked_signing_keys": []}
        )
        revoking = PolicyFile.model_validate(
            {"schema": 2, "policies": [POLICY], "revoked_signing_keys": ["a" * 64]}
        )
        assert revoking.revoked_signing_keys == ("a" * 64,)
        assert policy_digest(plain.policies[0]) == policy_digest(empty.policies[0])
        assert policy_digest(plain.policies[0]) == policy_digest(POLICY_FILE.policies[0])
        assert policy_digest(revoking.policies[0]) != policy_digest(plain.policies[0])

    @pytest.mark.parametrize(
        "document",
        [
            {"schema": 1, "policies": [POLICY], "revoked_signing_keys": ["a" * 64]},
            {"schema": 2, "policies": [{**POLICY, "revoked_signing_keys": ["a" * 64]}]},
            {"schema": 2, "policies": [POLICY], "revoked_signing_keys": ["not-hex"]},
        ],
        ids=["schema-1", "per-policy", "not-a-fingerprint"],
    )
    def test_misplaced_or_malformed_revocations_refused(
        self, document: dict[str, Any], tmp_path: Path
    ) -> None:
        """Revocations need schema 2, belong to the file level and are hex fingerprints."""
        path = tmp_path / "policies.json"
        path.write_text(json.dumps(document))
        with pytest.raises(PolicyError):
            load_policy_file(path)


class TestConfiguredKeyAtRunStart:
    def test_loose_key_refuses_the_run_and_writes_nothing(
        self,
        sqlite_store: Store,
        key_dir: Path,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """A configured key with loose permissions refuses the run before anything runs:
        KeyFileError naming the file, no receipt, no envelope."""
        private, _, _ = create_key_pair(key_dir)
        private.chmod(0o644)
        policies = tmp_path / "policies.json"
        policies.write_text(json.dumps({"schema": 1, "policies": [POLICY]}))
        policies.chmod(0o644)
        monkeypatch.setenv("BYTE_PROBE_POLICY_FILE", str(policies))
        monkeypatch.setenv("BYTE_PROBE_SIGNING_KEY", str(private))
        plan_id, _ = save_plan(sqlite_store, parse_plan(plan_doc()))
        with pytest.raises(KeyFileError, match=str(private)):
            service.probe_run(sqlite_store, plan_id, "test-policy")
        assert (count(sqlite_store, receipts), count(sqlite_store, receipt_signatures)) == (0, 0)

    def test_capabilities_name_the_key(
        self, key_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
    ) -> None:
        """`capabilities` carries the configured key's fingerprint, or "unsigned"."""
        monkeypatch.setenv("HOME", str(tmp_path))
        monkeypatch.delenv("BYTE_PROBE_SIGNING_KEY", raising=False)
        assert _capabilities()["signing_key"] == "unsigned"
        private, _, fingerprint = create_key_pair(key_dir)
        monkeypatch.setenv("BYTE_PROBE_SIGNING_KEY", str(private))
        assert _capabilities()["signing_key"] == fingerprint
