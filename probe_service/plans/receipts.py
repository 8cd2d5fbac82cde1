"""Receipts: a SHA-256 commitment over everything a probe's outcome rests on.

As docs/ARCHITECTURE.md, "Trust rules", says: the commitment verifies offline, and
operational fields (run id,
worker, timestamps, queue timings, the bounded output itself) sit outside it. The
commitment is a consistency check, not a signature: compare ``receipt_sha256`` with the
id the service reported to know the receipt is the one it wrote.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from ..canonical import sha256_hex, sha256_of_json
from ..errors import ReceiptInvalid

__all__ = ["RECEIPT_VERSION", "build_receipt", "verify_receipt"]

RECEIPT_VERSION = 1

#: Fields every receipt commits to; a receipt missing one is invalid.
COMMITTED_FIELDS = (
    "version",
    "action_key",
    "plan_id",
    "plan",
    "snapshot_id",
    "policy_id",
    "policy_digest",
    "executable",
    "sandbox_digest",
    "settings_digest",
    "limits_applied",
    "status",
    "exit_code",
    "stdout_sha256",
    "stderr_sha256",
    "check",
    "outcome",
    "reason",
    "elapsed_us",
)


def build_receipt(committed: dict[str, Any], operational: dict[str, Any]) -> dict[str, Any]:
    """Return a receipt: the committed fields, their digests, the commitment, operations."""
    missing = [f for f in COMMITTED_FIELDS if f not in committed]
    if missing:
        raise ReceiptInvalid(f"receipt: committed fields missing: {', '.join(missing)}")
    return {
        "receipt_sha256": sha256_of_json(committed),
        "committed": committed,
        "field_digests": {k: sha256_of_json(v) for k, v in committed.items()},
        "operational": operational,
    }


def verify_receipt(receipt: object) -> str:
    """Check a receipt offline and return its ``receipt_sha256``.

    Raises ReceiptInvalid naming the field that no longer matches where it can.
    """
    if not isinstance(receipt, dict):
        raise ReceiptInvalid("receipt: not a JSON object")
    committed = receipt.get("committed")
    claimed = receipt.get("receipt_sha256")
    if not isinstance(committed, dict) or not isinstance(claimed, str):
        raise ReceiptInvalid("receipt: 'committed' or 'receipt_sha256' missing")
    missing = sorted(set(COMMITTED_FIELDS) - set(committed))
    if missing:
        raise ReceiptInvalid(f"receipt: committed field(s) removed: {', '.join(missing)}")
    digests = receipt.get("field_digests")
    if isinstance(digests, dict):
        changed = sorted(k for k, v in committed.items() if digests.get(k) != sha256_of_json(v))
        added = sorted(set(committed) - set(digests))
        if changed or added:
            raise ReceiptInvalid(f"receipt: field(s) no longer match: {', '.join(changed + added)}")
    if sha256_of_json(committed) != claimed:
        raise ReceiptInvalid("receipt: receipt_sha256 does not match the committed fields")
    _verify_outputs(committed, receipt.get("operational"))
    return claimed


def _kept_pairs(
    committed: dict[str, Any], operational: dict[str, Any]
) -> list[tuple[str, Any, Any]]:
    """(where, kept base64, committed digest) for the probe's and each preflight's streams."""
    pairs = [
        (f"operational.{s}_b64", operational.get(f"{s}_b64"), committed.get(f"{s}_sha256"))
        for s in ("stdout", "stderr")
    ]
    kept = operational.get("preflight_output")
    ran = committed.get("preflight")
    if kept is not None:
        if not isinstance(kept, list) or not isinstance(ran, list) or len(kept) != len(ran):
            raise ReceiptInvalid("receipt: operational.preflight_output does not match preflight")
        for i, (output, command) in enumerate(zip(kept, ran, strict=True)):
            if not isinstance(output, dict) or not isinstance(command, dict):
                raise ReceiptInvalid(f"receipt: preflight.{i} is malformed")
            for s in ("stdout", "stderr"):
                where = f"operational.preflight_output.{i}.{s}_b64"
                pairs.append((where, output.get(f"{s}_b64"), command.get(f"{s}_sha256")))
    return pairs + _confirmation_pairs(committed, operational)


def _confirmation_pairs(
    committed: dict[str, Any], operational: dict[str, Any]
) -> list[tuple[str, Any, Any]]:
    """The confirming execution's kept streams and their committed digests."""
    kept = operational.get("confirmation")
    if kept is None:
        return []
    confirmation = committed.get("confirmation")
    if not isinstance(kept, dict) or not isinstance(confirmation, dict):
        raise ReceiptInvalid("receipt: operational.confirmation does not match confirmation")
    return [
        (
            f"operational.confirmation.{s}_b64",
            kept.get(f"{s}_b64"),
            confirmation.get(f"{s}_sha256"),
        )
        for s in ("stdout", "stderr")
    ]


def _verify_outputs(committed: dict[str, Any], operational: object) -> None:
    """Output kept beside the receipt must hash to the committed digests."""
    if not isinstance(operational, dict):
        return
    for where, encoded, digest in _kept_pairs(committed, operational):
        if encoded is None:
            continue
        try:
            data = base64.b64decode(encoded, validate=True)
        except (binascii.Error, TypeError) as exc:
            raise ReceiptInvalid(f"receipt: {where} is not base64") from exc
        # A probe that never launched commits no digest; its kept output must be empty.
        if (digest is None and data) or (digest is not None and sha256_hex(data) != digest):
            raise ReceiptInvalid(f"receipt: {where} does not match its committed digest")
