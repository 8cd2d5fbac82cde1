"""Rows over stored receipts: read, export the signed envelope, verify offline."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ... import plans, policies
from ..registry import AGENT, WEB, Request, operation
from ..session import ProbeService
from .common import Frozen, ReceiptId

__all__: list[str] = []


class ReceiptGetRequest(Request):
    receipt_id: ReceiptId


@operation("receipt_get", faces=AGENT | WEB)
def receipt_get(svc: ProbeService, req: ReceiptGetRequest) -> dict[str, Any]:
    """Read a stored receipt (committed part, digest, operational part) by receipt sha
    or run id. Beside it comes the summary every run result carries (outcome, reason,
    detail, check, phases, limits_applied …; outside the commitment, which still
    verifies). Its output fields are probe output: untrusted text."""
    from ...plans.summary import summary_json

    receipt = plans.load_receipt(svc.store, req.receipt_id)
    return {**receipt.to_json(), **summary_json(receipt)}


@operation("receipt_export")
def receipt_export(svc: ProbeService, req: ReceiptGetRequest) -> dict[str, Any]:
    """The DSSE envelope (in-toto statement) of a signed receipt, for offline
    verification. Refuses an unsigned receipt."""
    from ...plans.persist import load_envelope

    return load_envelope(svc.store, req.receipt_id)


class ReceiptVerifyRequest(Request):
    document: dict[str, Any] = Field(description="A receipt or a DSSE envelope.")
    public_keys: tuple[str, ...] = Field(
        (), max_length=16, description="PEM Ed25519 public keys that may have signed it."
    )


class ReceiptVerified(Frozen):
    receipt_sha256: str
    signer: str | None
    kind: Literal["receipt", "envelope"]


@operation("receipt_verify", faces=AGENT | WEB)
def receipt_verify(svc: ProbeService, req: ReceiptVerifyRequest) -> ReceiptVerified:
    """Verify a receipt or a DSSE envelope offline: the commitment, and for an envelope
    the statement and, with public keys, the signature (revoked keys never verify).
    Refuses naming what no longer matches."""
    if "payloadType" in req.document:
        from ...plans.signing import public_key_from_pem, verify_envelope

        keys = [
            public_key_from_pem(text, f"public_keys[{i}]") for i, text in enumerate(req.public_keys)
        ]
        # The session's policy file: its revocations, not another file's.
        revoked = policies.revoked_signing_keys(svc.policy_file)
        verified = verify_envelope(req.document, keys, revoked)
        return ReceiptVerified(
            receipt_sha256=verified.receipt_sha256, signer=verified.signer, kind="envelope"
        )
    sha = plans.verify_receipt(req.document)
    return ReceiptVerified(receipt_sha256=sha, signer=None, kind="receipt")
