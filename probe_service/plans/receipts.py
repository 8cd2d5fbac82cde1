"""Receipts: a SHA-256 commitment over everything a probe's outcome rests on.

As docs/ARCHITECTURE.md, "Trust rules", says: the commitment verifies offline, and
operational fields (run id,
worker, timestamps, queue timings, the bounded output itself) sit outside it. The
commitment is a consistency check, not a signature: compare ``receipt_sha256`` with the
id the service reported to know the receipt is the one it wrote. The receipt's shape is
its versioned model (``receipt_model``, docs/ARCHITECTURE.md, "Receipts").
"""

from __future__ import annotations

import base64
import binascii

from ..canonical import sha256_hex, sha256_of_json
from ..errors import ReceiptInvalid
from ..store import Store
from .case_lists import check_case_list, load_case_list
from .receipt_model import (
    RECEIPT_VERSION,
    RECEIPT_VERSIONS,
    Committed,
    Operational,
    Receipt,
    parse_receipt,
)
from .receipt_parts import JunitV2

__all__ = ["RECEIPT_VERSION", "build_receipt", "verify_receipt", "verify_stored_receipt"]


def build_receipt(committed: Committed, operational: Operational) -> Receipt:
    """Return a receipt: the committed fields, their digests, the commitment, operations.

    Raises ReceiptInvalid when ``committed`` is of a version this release does not write.
    """
    model = RECEIPT_VERSIONS.get(committed.version)
    if model is None or not isinstance(committed, model.committed_model):
        raise ReceiptInvalid(f"receipt: committed.version {committed.version} is not written here")
    fields = committed.json_values()
    return model(
        receipt_sha256=sha256_of_json(fields),
        committed=committed,
        field_digests={k: sha256_of_json(v) for k, v in fields.items()},
        operational=operational,
    )


def verify_receipt(receipt: object, case_list: bytes | None = None) -> str:
    """Check a receipt (a JSON object, or a ``Receipt``) offline and return its
    ``receipt_sha256``; with ``case_list``, a version-2 receipt's JUnit case list too.

    Raises ReceiptInvalid naming the field that no longer matches where it can.
    """
    parsed = receipt if isinstance(receipt, Receipt) else parse_receipt(receipt)
    junit = parsed.committed.junit
    if case_list is not None:
        if not isinstance(junit, JunitV2):
            raise ReceiptInvalid("receipt: a case list was given, but it commits to none")
        check_case_list(junit, case_list)
    committed = parsed.committed.json_values()
    digests = parsed.field_digests
    if digests is not None:
        changed = sorted(k for k, v in committed.items() if digests.get(k) != sha256_of_json(v))
        added = sorted(set(committed) - set(digests))
        if changed or added:
            raise ReceiptInvalid(f"receipt: field(s) no longer match: {', '.join(changed + added)}")
    if sha256_of_json(committed) != parsed.receipt_sha256:
        raise ReceiptInvalid("receipt: receipt_sha256 does not match the committed fields")
    _verify_outputs(parsed)
    return parsed.receipt_sha256


def verify_stored_receipt(store: Store, receipt: object) -> str:
    """``verify_receipt``, with a version-2 receipt's case list read from ``store``
    (docs/ARCHITECTURE.md, "JUnit oracle"). Raises ReceiptInvalid naming what differs,
    or the case list's digest when it is not stored."""
    parsed = receipt if isinstance(receipt, Receipt) else parse_receipt(receipt)
    junit = parsed.committed.junit
    case_list = load_case_list(store, junit) if isinstance(junit, JunitV2) else None
    return verify_receipt(parsed, case_list)


def _kept_pairs(receipt: Receipt) -> list[tuple[str, str | None, str | None]]:
    """(where, kept base64, committed digest) for the probe's, each preflight's and the
    confirming execution's streams."""
    committed, operational = receipt.committed, receipt.operational
    pairs = [
        ("operational.stdout_b64", operational.stdout_b64, committed.stdout_sha256),
        ("operational.stderr_b64", operational.stderr_b64, committed.stderr_sha256),
    ]
    kept, ran = operational.preflight_output, committed.preflight
    if kept is not None:
        if ran is None or len(kept) != len(ran):
            raise ReceiptInvalid("receipt: operational.preflight_output does not match preflight")
        for i, (output, command) in enumerate(zip(kept, ran, strict=True)):
            where = f"operational.preflight_output.{i}"
            pairs.append((f"{where}.stdout_b64", output.stdout_b64, command.stdout_sha256))
            pairs.append((f"{where}.stderr_b64", output.stderr_b64, command.stderr_sha256))
    second, confirmation = operational.confirmation, committed.confirmation
    if second is not None:
        if confirmation is None:
            raise ReceiptInvalid("receipt: operational.confirmation does not match confirmation")
        where = "operational.confirmation"
        pairs.append((f"{where}.stdout_b64", second.stdout_b64, confirmation.stdout_sha256))
        pairs.append((f"{where}.stderr_b64", second.stderr_b64, confirmation.stderr_sha256))
    return pairs


def _verify_outputs(receipt: Receipt) -> None:
    """Output kept beside the receipt must hash to the committed digests."""
    for where, encoded, digest in _kept_pairs(receipt):
        if encoded is None:
            continue
        try:
            data = base64.b64decode(encoded, validate=True)
        except binascii.Error as exc:
            raise ReceiptInvalid(f"receipt: {where} is not base64") from exc
        # A probe that never launched commits no digest; its kept output must be empty.
        if (digest is None and data) or (digest is not None and sha256_hex(data) != digest):
            raise ReceiptInvalid(f"receipt: {where} does not match its committed digest")
