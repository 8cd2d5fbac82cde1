"""Canonical JSON and SHA-256 helpers: the one way ids and commitments are computed."""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["canonical_json", "sha256_hex", "sha256_of_json"]


def canonical_json(value: Any) -> bytes:
    """Encode ``value`` as canonical JSON: sorted keys, no insignificant whitespace, UTF-8."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def sha256_hex(data: bytes) -> str:
    """Return the lowercase hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def sha256_of_json(value: Any) -> str:
    """Return the SHA-256 of the canonical JSON encoding of ``value``."""
    return sha256_hex(canonical_json(value))
