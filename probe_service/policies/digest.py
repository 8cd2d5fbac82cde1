"""The SHA-256 digest a receipt commits to for a policy."""

from __future__ import annotations

from probe_service.canonical import canonical_json, sha256_of_json
from probe_service.policies.model import Policy

__all__ = ["canonical_json", "policy_digest"]


def policy_digest(policy: Policy) -> str:
    """Return the hex SHA-256 of the policy's canonical JSON (all fields, defaults included)."""
    return sha256_of_json(policy.model_dump(mode="json"))
