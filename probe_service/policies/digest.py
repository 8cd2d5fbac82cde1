"""Canonical JSON and the SHA-256 digest a receipt commits to for a policy."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from probe_service.policies.model import Policy

__all__ = ["canonical_json", "policy_digest"]


def canonical_json(value: Any) -> bytes:
    """Serialize ``value`` as canonical JSON: sorted keys, no spaces, UTF-8."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def policy_digest(policy: Policy) -> str:
    """Return the hex SHA-256 of the policy's canonical JSON (all fields, defaults included)."""
    return hashlib.sha256(canonical_json(policy.model_dump(mode="json"))).hexdigest()
