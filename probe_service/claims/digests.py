"""Canonical JSON digests used for baselines, records and audit entries."""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["digest_bytes", "digest_json"]


def digest_bytes(data: bytes) -> str:
    """Lowercase hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def digest_json(value: Any) -> str:
    """SHA-256 of the canonical JSON of ``value`` (sorted keys, compact, UTF-8)."""
    encoded = json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")
    return digest_bytes(encoded)
