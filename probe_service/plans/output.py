"""The output a receipt keeps, as bytes: outside the commitment, bound by its digests."""

from __future__ import annotations

import base64
import binascii

from .receipt_model import Operational, Receipt
from .receipt_parts import KeptStreams

__all__ = ["kept_output"]


def kept_output(source: Receipt | Operational | KeptStreams, stream: str) -> bytes:
    """The kept bytes of ``stream`` (``stdout``/``stderr``) of a receipt, of a confirming
    execution or of a preflight command; empty when none were kept."""
    kept = source.operational if isinstance(source, Receipt) else source
    encoded = kept.stdout_b64 if stream == "stdout" else kept.stderr_b64
    try:
        return base64.b64decode(encoded or "", validate=True)
    except (binascii.Error, ValueError):
        return b""
