"""The output a receipt keeps, as bytes: outside the commitment, bound by its digests."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

__all__ = ["kept_output"]


def kept_output(receipt: Mapping[str, Any], stream: str) -> bytes:
    """The kept bytes of ``stream`` (``stdout``/``stderr``); empty when none were kept."""
    encoded = receipt.get("operational", {}).get(f"{stream}_b64") or ""
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        return b""
