"""The SHA-256 digest a receipt commits to for a policy."""

from __future__ import annotations

from typing import Any

from probe_service.canonical import canonical_json, sha256_of_json
from probe_service.policies.model import (
    DEFAULT_ALLOWED_PORTS,
    DEFAULT_JUNIT_MAX_BYTES,
    DEFAULT_JUNIT_MAX_CASES,
    DEFAULT_MAX_OPEN_FILES,
    Policy,
)

__all__ = ["canonical_json", "policy_body", "policy_digest"]

#: Keys of later schemas and the value an older policy means by leaving them out.
_SCHEMA_1_MEANING: dict[str, Any] = {
    "allowed_ports": list(DEFAULT_ALLOWED_PORTS),
    "scratch_inodes": None,
    "revoked_signing_keys": [],
    "toolchains": {},
    "max_open_files": None,
    "confirm_refutes": None,
    "plan_environment": [],
    "junit_max_bytes": None,
    "junit_max_cases": None,
}
#: Schema-3 values that say in words what leaving the key out means.
_SAME_AS_UNSET: dict[str, Any] = {
    "max_open_files": DEFAULT_MAX_OPEN_FILES,
    "confirm_refutes": True,
    "junit_max_bytes": DEFAULT_JUNIT_MAX_BYTES,
    "junit_max_cases": DEFAULT_JUNIT_MAX_CASES,
}


def policy_body(policy: Policy) -> dict[str, Any]:
    """Return the JSON the digest covers: every field, later schemas' keys only when set.

    A schema-1 policy and the same policy written as schema 2 or 3 with every new key
    left at its meaning are the same policy, so they share one digest -- the digest
    receipts already recorded for it.
    """
    body = policy.model_dump(mode="json")
    for key, meaning in _SCHEMA_1_MEANING.items():
        if body[key] == meaning or (key in _SAME_AS_UNSET and body[key] == _SAME_AS_UNSET[key]):
            del body[key]
    return body


def policy_digest(policy: Policy) -> str:
    """Return the hex SHA-256 of the policy's canonical JSON body (``policy_body``)."""
    return sha256_of_json(policy_body(policy))
