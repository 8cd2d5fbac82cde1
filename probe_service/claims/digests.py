"""Canonical JSON digests used for baselines, records and audit entries."""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["digest_bytes", "digest_json"]


def digest_bytes(data: bytes) -> str:
    """Lowercase hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


#: ``json.dumps`` with these options builds this encoder on every call; one shared
#: instance (it keeps no state between calls) encodes byte for byte the same.
_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def digest_json(value: Any) -> str:
    """SHA-256 of the canonical JSON of ``value`` (sorted keys, compact, UTF-8)."""
    return digest_bytes(_CANONICAL.encode(value).encode("utf-8"))
