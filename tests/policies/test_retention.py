"""The policy file's retention (schema 3): its floors, and no policy digest moves."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from probe_service.policies import PolicyFile, policy_digest
from probe_service.policies.retention import Retention

from .conftest import VALID_POLICY


def _file(schema: int, **extra: object) -> PolicyFile:
    return PolicyFile.model_validate({"schema": schema, "policies": [VALID_POLICY], **extra})


def test_retention_needs_schema_3() -> None:
    """A schema-2 file naming retention is refused."""
    with pytest.raises(ValidationError, match="retention needs schema 3"):
        _file(2, retention={"runs_days": 30})


def test_retention_leaves_policy_digests_alone() -> None:
    """The same policy under a file with and without retention has one digest."""
    plain = _file(3).policies[0]
    kept = _file(3, retention={"runs_days": 30, "blobs_days": 7}).policies[0]
    assert policy_digest(plain) == policy_digest(kept) == policy_digest(_file(1).policies[0])


@pytest.mark.parametrize(
    "values",
    [{"runs_days": 0}, {"events_days": -1}, {"grace_minutes": 29}, {"snapshots_days": 10**6}],
)
def test_below_the_floors_is_refused(values: dict[str, int]) -> None:
    """No retention shorter than a day, no grace period under 30 minutes."""
    with pytest.raises(ValidationError):
        Retention.model_validate(values)


def test_unknown_retention_key_is_refused() -> None:
    """A misspelt kind is an error, not a kind kept forever."""
    with pytest.raises(ValidationError, match="run_days"):
        Retention.model_validate({"run_days": 30})
