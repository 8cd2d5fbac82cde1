"""Canonical JSON and SHA-256 helpers: the one way ids and commitments are computed."""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["canonical_json", "sha256_hex", "sha256_of_json"]


#: ``json.dumps`` with these options builds this encoder on every call; one shared
#: instance (it keeps no state between calls) encodes byte for byte the same.
_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def canonical_json(value: Any) -> bytes:
    """Encode ``value`` as canonical JSON: sorted keys, no insignificant whitespace, UTF-8."""
    return _CANONICAL.encode(value).encode("utf-8")


def sha256_hex(data: bytes) -> str:
    """Return the lowercase hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def sha256_of_json(value: Any) -> str:
    """Return the SHA-256 of the canonical JSON encoding of ``value``."""
    return sha256_hex(canonical_json(value))
