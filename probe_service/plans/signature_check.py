"""Which stored receipts count as signed for ``gate --require-signed`` (docs/ARCHITECTURE.md,
"Signed receipts")."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ..errors import NotFound, ReceiptInvalid
from ..policies import revoked_signing_keys
from ..store import Store
from .persist import load_envelope
from .signing import fingerprint_of, load_public_key, public_key_from_pem, verify_envelope

__all__ = ["signature_requirement"]

_FINGERPRINT = re.compile(r"^[0-9a-f]{64}$")


def _accepted_keys(accepted: Sequence[str]) -> tuple[list[Ed25519PublicKey], set[str]]:
    """The keys and fingerprints ``accepted`` names; raises KeyFileError for a bad key file."""
    keys: list[Ed25519PublicKey] = []
    fingerprints: set[str] = set()
    for i, item in enumerate(accepted):
        if _FINGERPRINT.fullmatch(item):
            fingerprints.add(item)
            continue
        if item.lstrip().startswith("-----BEGIN"):
            key = public_key_from_pem(item, f"require_signed[{i}]")
        else:
            key = load_public_key(Path(item))
        keys.append(key)
        fingerprints.add(fingerprint_of(key))
    return keys, fingerprints


def signature_requirement(
    store: Store, accepted: Sequence[str], policy_file: Path
) -> Callable[[str], str | None]:
    """A check of one receipt id that returns why it is not signed by one of ``accepted``
    (hex fingerprints, PEM public keys, or key files from the CLI), or None.

    A key (PEM or file) verifies the stored envelope's signature; a bare fingerprint accepts
    an envelope whose statement and commitment verify and whose keyid it names. A
    fingerprint ``policy_file`` (the session's) revokes counts as unsigned.
    Raises KeyFileError for an unreadable key file, PolicyError for a bad policy file.
    """
    keys, fingerprints = _accepted_keys(accepted)
    revoked = set(revoked_signing_keys(policy_file))

    def check(receipt_id: str) -> str | None:
        try:
            envelope = load_envelope(store, receipt_id)
        except NotFound:
            return "unsigned"
        entries = envelope.get("signatures")
        keyids = [e.get("keyid") for e in entries if isinstance(e, dict)] if entries else []
        named = [k for k in keyids if isinstance(k, str)]
        if any(k in revoked for k in named):
            return f"signed by revoked key {', '.join(named)} (counts as unsigned)"
        usable = [k for k in keys if fingerprint_of(k) in named]
        try:
            verified = verify_envelope(envelope, usable, revoked)
        except ReceiptInvalid as exc:
            return str(exc)
        if verified.receipt_sha256 != receipt_id:
            return "its envelope is for another receipt"
        if verified.signer is None and not fingerprints & set(named):
            return f"signed by {', '.join(named) or 'no key'}, not by a required key"
        return None

    return check
