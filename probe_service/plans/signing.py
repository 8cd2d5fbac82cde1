"""Signed receipts: worker keys, in-toto statements, DSSE envelopes, offline verification.

docs/ARCHITECTURE.md, "Signed receipts": a worker with a signing key (Ed25519) emits every
receipt also as an in-toto Statement v1 whose subject is the snapshot and the plan and whose
predicate is the receipt's committed fields and ``receipt_sha256``, wrapped in a DSSE
envelope. A key's fingerprint (its ``keyid``) is the lowercase hex SHA-256 of the raw
32-byte Ed25519 public key. A verifier needs only the public key and the envelope.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ..canonical import canonical_json, sha256_hex, sha256_of_json
from ..errors import KeyFileError, ReceiptInvalid
from ..settings import SIGNING_KEY_ENV, Settings
from .receipt_model import Receipt, parse_committed

__all__ = [
    "PAYLOAD_TYPE",
    "PREDICATE_TYPE",
    "SIGNING_KEY_ENV",
    "STATEMENT_TYPE",
    "UNSIGNED",
    "SigningKey",
    "VerifiedEnvelope",
    "configured_signing_key",
    "create_key_pair",
    "dsse_pae",
    "fingerprint_of",
    "load_public_key",
    "load_signing_key",
    "public_key_from_pem",
    "read_public_key",
    "receipt_signer",
    "sign_receipt",
    "statement_for",
    "verify_envelope",
]

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
PREDICATE_TYPE = "https://byte-probe.dev/attestations/probe-receipt/v1"
#: What a receipt names as its signer when no key signed it.
UNSIGNED = "unsigned"
PRIVATE_KEY_NAME = "signing-key.pem"
PUBLIC_KEY_NAME = "signing-key.pub.pem"
_MAX_KEY_FILE_BYTES = 64 * 1024


def fingerprint_of(public: Ed25519PublicKey) -> str:
    """The key's fingerprint and DSSE keyid: hex SHA-256 of the raw public key bytes."""
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return sha256_hex(raw)


@dataclass(frozen=True)
class SigningKey:
    """A loaded Ed25519 private key and its fingerprint."""

    private: Ed25519PrivateKey
    fingerprint: str

    def sign(self, data: bytes) -> bytes:
        return self.private.sign(data)


def create_key_pair(out_dir: Path) -> tuple[Path, Path, str]:
    """Write a new private key (mode 0600) and its public key into ``out_dir``.

    Returns ``(private_path, public_path, fingerprint)``. Refuses (KeyFileError) to
    overwrite a key or to write inside a git repository.
    """
    out_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    _refuse_repository(out_dir.resolve())
    private_path, public_path = out_dir / PRIVATE_KEY_NAME, out_dir / PUBLIC_KEY_NAME
    for path in (private_path, public_path):
        if os.path.lexists(path):
            raise KeyFileError(f"{path}: a key file already exists; not overwritten")
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(pem)
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    public_path.write_bytes(public_pem)
    return private_path, public_path, fingerprint_of(key.public_key())


def _refuse_repository(path: Path) -> None:
    for parent in (path, *path.parents):
        if (parent / ".git").exists():
            raise KeyFileError(f"{path}: inside a repository ({parent}); keys never live there")


def _read_key_file(path: Path, *, private: bool) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        reason = "is a symbolic link" if os.path.islink(path) else exc.strerror
        raise KeyFileError(f"{path}: cannot open key file: {reason}") from exc
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise KeyFileError(f"{path}: key file is not a regular file")
        if private and info.st_mode & 0o077:
            raise KeyFileError(
                f"{path}: private key file has group/other permissions "
                f"({stat.S_IMODE(info.st_mode):04o}); it must be owner-only (0600)"
            )
        if private and info.st_uid != os.geteuid():
            raise KeyFileError(f"{path}: private key file is not owned by this user")
        return handle.read(_MAX_KEY_FILE_BYTES)


def load_signing_key(path: Path, forbidden_roots: Iterable[Path] = ()) -> SigningKey:
    """Load an owner-only Ed25519 private key file; raises KeyFileError naming the file.

    Refused: a symbolic link, group/other permission bits, another owner, a file inside a
    git repository or under one of ``forbidden_roots`` (the store).
    """
    resolved = path.absolute()
    _refuse_repository(resolved.parent.resolve())
    for root in forbidden_roots:
        if resolved.parent.resolve().is_relative_to(root.resolve()):
            raise KeyFileError(f"{path}: inside the store ({root}); keys never live there")
    raw = _read_key_file(path, private=True)
    try:
        key = serialization.load_pem_private_key(raw, password=None)
    except (ValueError, TypeError) as exc:
        raise KeyFileError(f"{path}: not an unencrypted PEM private key") from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(f"{path}: not an Ed25519 private key")
    return SigningKey(key, fingerprint_of(key.public_key()))


def public_key_from_pem(text: str, what: str) -> Ed25519PublicKey:
    """An Ed25519 public key from PEM text; KeyFileError names ``what`` otherwise."""
    try:
        key: Any = serialization.load_pem_public_key(text.encode("utf-8"))
    except (ValueError, UnicodeEncodeError) as exc:
        raise KeyFileError(f"{what}: not a PEM public key") from exc
    return _ed25519_public(key, what)


def load_public_key(path: Path) -> Ed25519PublicKey:
    """Load an Ed25519 public key (PEM) or derive it from a private key file."""
    raw = _read_key_file(path, private=False)
    try:
        key: Any = serialization.load_pem_public_key(raw)
    except ValueError:
        try:
            key = serialization.load_pem_private_key(raw, password=None).public_key()
        except (ValueError, TypeError) as exc:
            raise KeyFileError(f"{path}: not a PEM Ed25519 public key") from exc
    return _ed25519_public(key, str(path))


def _ed25519_public(key: object, what: str) -> Ed25519PublicKey:
    if not isinstance(key, Ed25519PublicKey):
        raise KeyFileError(f"{what}: not an Ed25519 public key")
    return key


def read_public_key(path: Path) -> str:
    """The PEM text of a public key file the user named, for a request's ``public_keys`` or
    ``require_signed`` (machine faces never name files, so the CLI reads them).

    Raises KeyFileError naming the file: unreadable, a symbolic link, not a regular file,
    or not a PEM public key (a private key is refused: give its public half).
    """
    text = _read_key_file(path, private=False).decode("ascii", errors="replace")
    if "PRIVATE KEY-----" in text:
        raise KeyFileError(f"{path}: a private key; give its public key (signing-key.pub.pem)")
    if not text.lstrip().startswith("-----BEGIN PUBLIC KEY-----"):
        raise KeyFileError(f"{path}: not a PEM Ed25519 public key")
    return text


def configured_signing_key(
    settings: Settings, forbidden_roots: Iterable[Path] = ()
) -> SigningKey | None:
    """The signing key the settings name (``BYTE_PROBE_SIGNING_KEY``, else
    ``~/.zyte/agent/signing-key.pem``), or None when none is configured.

    A key named by the environment must load; the default file may be absent. Raises
    KeyFileError for a key that is unsafe, misplaced or malformed.
    """
    path = settings.signing_key
    if not settings.signing_key_named and not os.path.lexists(path):
        return None
    return load_signing_key(path, forbidden_roots)


def dsse_pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding: "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def statement_for(receipt: Receipt) -> dict[str, Any]:
    """The in-toto Statement v1 of a receipt: subject snapshot and plan, predicate the
    committed fields and their commitment."""
    committed = receipt.committed
    return {
        "_type": STATEMENT_TYPE,
        "subject": [
            {"name": "snapshot", "digest": {"sha256": committed.snapshot_id}},
            {"name": "plan", "digest": {"sha256": committed.plan_id}},
        ],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "receipt_sha256": receipt.receipt_sha256,
            "committed": committed.json_values(),
        },
    }


def sign_receipt(receipt: Receipt, key: SigningKey) -> dict[str, Any]:
    """The DSSE envelope of ``receipt``'s statement, signed by ``key``."""
    payload = canonical_json(statement_for(receipt))
    signature = key.sign(dsse_pae(PAYLOAD_TYPE, payload))
    return {
        "payloadType": PAYLOAD_TYPE,
        "payload": base64.b64encode(payload).decode("ascii"),
        "signatures": [
            {"keyid": key.fingerprint, "sig": base64.b64encode(signature).decode("ascii")}
        ],
    }


def receipt_signer(receipt: Receipt, revoked: Iterable[str] = ()) -> str:
    """The fingerprint a receipt names as its signer, or ``unsigned`` (also when revoked,
    and for a receipt from before signing, which names none)."""
    signer = receipt.committed.signer
    if signer is None or signer in set(revoked):
        return UNSIGNED
    return signer


@dataclass(frozen=True)
class VerifiedEnvelope:
    """What an envelope verification established."""

    receipt_sha256: str
    #: The fingerprint whose signature verified, or None when no key was given.
    signer: str | None
    statement: dict[str, Any]


def _b64(value: object, what: str) -> bytes:
    if not isinstance(value, str):
        raise ReceiptInvalid(f"envelope: {what} is not a base64 string")
    try:
        return base64.b64decode(value, validate=True)
    except binascii.Error as exc:
        raise ReceiptInvalid(f"envelope: {what} is not base64") from exc


def verify_envelope(
    envelope: object,
    keys: Iterable[Ed25519PublicKey] = (),
    revoked: Iterable[str] = (),
) -> VerifiedEnvelope:
    """Verify a DSSE envelope offline: signature (when keys are given), statement, commitment.

    Several keys may be valid at once; a signature is tried with the key whose fingerprint
    equals its keyid. A revoked fingerprint never verifies. Raises ReceiptInvalid naming
    what failed: the envelope, the signature, the statement, the subject or the commitment.
    """
    if not isinstance(envelope, dict) or "payload" not in envelope:
        raise ReceiptInvalid("envelope: not a DSSE envelope (no payload)")
    if envelope.get("payloadType") != PAYLOAD_TYPE:
        raise ReceiptInvalid(f"envelope: payloadType is not {PAYLOAD_TYPE}")
    payload = _b64(envelope.get("payload"), "payload")
    signer = _check_signatures(envelope, payload, list(keys), set(revoked))
    try:
        statement = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ReceiptInvalid("statement: payload is not JSON") from exc
    sha, named = _check_statement(statement)
    if signer is not None and named != signer:
        raise ReceiptInvalid(
            f"statement: the receipt names signer {named!r}, not the key that signed it ({signer})"
        )
    return VerifiedEnvelope(receipt_sha256=sha, signer=signer, statement=statement)


def _check_signatures(
    envelope: dict[str, Any], payload: bytes, keys: list[Ed25519PublicKey], revoked: set[str]
) -> str | None:
    if not keys:
        return None
    by_id = {fingerprint_of(k): k for k in keys}
    signatures = envelope.get("signatures")
    if not isinstance(signatures, list) or not signatures:
        raise ReceiptInvalid("signature: the envelope carries no signature")
    pae = dsse_pae(PAYLOAD_TYPE, payload)
    named: list[str] = []
    for entry in signatures:
        keyid = entry.get("keyid") if isinstance(entry, dict) else None
        if not isinstance(keyid, str):
            continue
        named.append(keyid)
        if keyid in revoked or keyid not in by_id:
            continue
        try:
            by_id[keyid].verify(_b64(entry.get("sig"), "sig"), pae)
        except InvalidSignature:
            raise ReceiptInvalid(
                f"signature: does not verify with key {keyid} (envelope tampered)"
            ) from None
        return keyid
    if any(k in revoked for k in named):
        raise ReceiptInvalid(f"signature: key {', '.join(named)} is revoked")
    raise ReceiptInvalid(
        f"signature: signed by {', '.join(named) or 'no keyid'}, not by a given key "
        f"({', '.join(sorted(by_id))})"
    )


def _check_statement(statement: object) -> tuple[str, str | None]:
    """The statement's commitment and the signer its receipt names, once both check."""
    if not isinstance(statement, dict) or statement.get("_type") != STATEMENT_TYPE:
        raise ReceiptInvalid(f"statement: _type is not {STATEMENT_TYPE}")
    if statement.get("predicateType") != PREDICATE_TYPE:
        raise ReceiptInvalid(f"statement: predicateType is not {PREDICATE_TYPE}")
    predicate = statement.get("predicate")
    committed = predicate.get("committed") if isinstance(predicate, dict) else None
    claimed = predicate.get("receipt_sha256") if isinstance(predicate, dict) else None
    if not isinstance(committed, dict) or not isinstance(claimed, str):
        raise ReceiptInvalid("statement: predicate lacks 'committed' or 'receipt_sha256'")
    parsed = parse_committed(committed, "statement")
    if sha256_of_json(committed) != claimed:
        raise ReceiptInvalid("commitment: receipt_sha256 does not match the committed fields")
    expected = {"snapshot": parsed.snapshot_id, "plan": parsed.plan_id}
    subject = statement.get("subject")
    found: dict[str, object] = {}
    if isinstance(subject, list):
        for item in subject:
            if isinstance(item, dict) and isinstance(item.get("digest"), dict):
                found[str(item.get("name"))] = item["digest"].get("sha256")
    for name, digest in expected.items():
        if found.get(name) != digest:
            raise ReceiptInvalid(
                f"subject: {name} digest does not match the receipt's {name} ({digest})"
            )
    return claimed, parsed.signer
