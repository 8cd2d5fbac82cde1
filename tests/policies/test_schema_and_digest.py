"""The committed JSON Schema and the canonical policy digest."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from probe_service.policies import Policy, canonical_json, policy_digest
from probe_service.policies.schema import default_schema_path, render_schema

from .conftest import VALID_POLICY


def test_committed_schema_matches_the_model() -> None:
    """policies/probe-policies.schema.json equals the schema generated from the model."""
    assert default_schema_path().read_text(encoding="utf-8") == render_schema()


def test_schema_forbids_unknown_keys() -> None:
    """The exported schema carries additionalProperties false at both levels."""
    schema = json.loads(render_schema())
    assert schema["additionalProperties"] is False
    assert schema["$defs"]["Policy"]["additionalProperties"] is False


def test_digest_is_sha256_of_canonical_json() -> None:
    """policy_digest is SHA-256 over sorted-key, compact, UTF-8 JSON of every field.

    Schema-2 keys at their schema-1 meaning are left out of the body.
    """
    policy = Policy.model_validate({**VALID_POLICY, "scratch_inodes": 64})
    fields = policy.model_dump(mode="json")
    del fields["allowed_ports"]
    del fields["revoked_signing_keys"]  # no revocations: its schema-1 meaning
    del fields["toolchains"]  # no toolchains: its schema-1 meaning
    del fields["max_open_files"]  # unset: the runner's default (schema 3)
    del fields["confirm_refutes"]  # unset: refutations are confirmed (schema 3)
    del fields["plan_environment"]  # none: a plan sets nothing (schema 3)
    del fields["junit_max_bytes"]  # unset: the default cap (schema 3)
    del fields["junit_max_cases"]  # unset: the default cap (schema 3)
    body = json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()
    assert policy_digest(policy) == hashlib.sha256(body).hexdigest()


def test_schema_1_policy_keeps_its_recorded_digest() -> None:
    """A schema-1 policy's digest is the one schema-1 code recorded in receipts."""
    policy = Policy.model_validate(VALID_POLICY)
    recorded = "664cf28b3a4fc57f2ae7d1b229b2debd34bff9cbf9a72e9d4bf264c320027f3c"
    assert policy_digest(policy) == recorded


def test_explicit_defaults_share_the_schema_1_digest() -> None:
    """Ports [443, 80] and no inode limit, written out, are the same policy as schema 1."""
    implicit = Policy.model_validate(VALID_POLICY)
    explicit = Policy.model_validate(
        {**VALID_POLICY, "allowed_ports": [443, 80], "scratch_inodes": None}
    )
    assert policy_digest(explicit) == policy_digest(implicit)


def test_schema_3_keys_written_at_their_meaning_share_the_digest() -> None:
    """max_open_files 1024 and confirm_refutes true, written out, change nothing."""
    implicit = Policy.model_validate(VALID_POLICY)
    explicit = Policy.model_validate(
        {**VALID_POLICY, "max_open_files": 1024, "confirm_refutes": True}
    )
    assert policy_digest(explicit) == policy_digest(implicit)


@pytest.mark.parametrize(
    "change",
    [
        {"allowed_ports": [443]},
        {"allowed_ports": [80, 443, 8080]},
        {"scratch_inodes": 16},
        {"max_open_files": 256},
        {"confirm_refutes": False},
    ],
)
def test_later_schema_keys_count_in_the_digest(change: dict[str, Any]) -> None:
    """Any non-default schema-2 or schema-3 value changes the digest."""
    base = Policy.model_validate(VALID_POLICY)
    assert policy_digest(Policy.model_validate({**VALID_POLICY, **change})) != policy_digest(base)


def test_digest_changes_with_any_field() -> None:
    """Changing one limit changes the digest."""
    one = Policy.model_validate(VALID_POLICY)
    two = Policy.model_validate({**VALID_POLICY, "timeout_seconds": 31})
    assert policy_digest(one) != policy_digest(two)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
    max_leaves=20,
)


@given(JSON)
def test_canonical_json_round_trips(value: Any) -> None:
    """Canonical JSON parses back to the same value and is stable under re-encoding."""
    encoded = canonical_json(value)
    assert json.loads(encoded) == value
    assert canonical_json(json.loads(encoded)) == encoded


def test_example_schema_path_is_in_repo() -> None:
    """The schema lives in the top-level policies/ folder."""
    assert default_schema_path().parent.name == "policies"
    assert Path(default_schema_path()).exists()
