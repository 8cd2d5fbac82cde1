"""Helpers for plan tests: a valid plan document to vary one field at a time, and a real
probe under a policy to vary (the refusal tests here and in ``tests/security``)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from probe_service.plans import ProbeRunResult
from probe_service.policies import POLICY_FILE_ENV
from probe_service.sandbox import SandboxRuntime
from probe_service.store import Store

from .. import calls as service

SNAPSHOT_ID = "a" * 64

#: A minimal policy for runs that never launch a probe (refused or abandoned runs).
TEST_POLICY: dict[str, Any] = {
    "id": "test-policy",
    "allowed_executables": ["python3"],
    "timeout_seconds": 10,
    "max_output_bytes": 1000,
    "allowed_domains": [],
    "environment": [],
}

TRUSTED_SOURCES = (
    "published_specification",
    "user_requirement",
    "historical_regression",
    "differential_reference",
)
ALL_SOURCES = (*TRUSTED_SOURCES, "model_inferred")


def oracle_doc(
    check: dict[str, Any] | None = None,
    source: str = "user_requirement",
    reference: str | None = "issue #1",
) -> dict[str, Any]:
    """An oracle document; ``reference=None`` leaves the key out."""
    doc: dict[str, Any] = {
        "check": check if check is not None else {"kind": "exit_code", "equals": 0},
        "source": source,
    }
    if reference is not None:
        doc["reference"] = reference
    return doc


def plan_doc(**overrides: Any) -> dict[str, Any]:
    """A valid plan document with ``overrides`` applied (deep-copied, safe to mutate)."""
    doc: dict[str, Any] = {
        "snapshot_id": SNAPSHOT_ID,
        "policy_id": "test-policy",
        "executable": "python3",
        "args": ["-c", "print(1)"],
        "oracle": oracle_doc(),
    }
    doc.update(overrides)
    return copy.deepcopy(doc)


REFUSAL_POLICY_ID = "refusals"

RefusalProbe = Callable[..., ProbeRunResult]


def refusal_policy(**overrides: Any) -> dict[str, Any]:
    """A policy file running ``python3`` without network; ``overrides`` change the policy."""
    policy: dict[str, Any] = {
        "id": REFUSAL_POLICY_ID,
        "allowed_executables": ["python3"],
        "timeout_seconds": 60,
        "max_output_bytes": 100_000,
        "allowed_domains": [],
        "environment": ["LANG"],
    }
    policy.update(overrides)
    return {"schema": 1, "policies": [policy]}


@pytest.fixture
def refusal_probe(
    sqlite_store: Store,
    repo: Path,
    runtime: SandboxRuntime,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> RefusalProbe:
    """Run ``python3 -c CODE`` on a small snapshot, through the real sandbox, under
    ``refusal_policy(**policy)``; exit code 0 supports, a failure refutes (``plan``
    overrides plan fields)."""
    (repo / "data.txt").write_text("original\n")
    snapshot_id = service.snapshot_capture(sqlite_store, repo).snapshot_id
    admin = tmp_path / "admin"
    admin.mkdir()

    def _probe(code: str, *, plan: dict[str, Any] | None = None, **policy: Any) -> ProbeRunResult:
        path = admin / "policies.json"
        path.write_text(json.dumps(refusal_policy(**policy)))
        path.chmod(0o600)
        monkeypatch.setenv(POLICY_FILE_ENV, str(path))
        fields: dict[str, Any] = {
            "args": ["-c", code],
            "failure_refutes": True,
            "oracle": oracle_doc(reference="issue #23"),
            **(plan or {}),
        }
        doc = plan_doc(snapshot_id=snapshot_id, policy_id=REFUSAL_POLICY_ID, **fields)
        plan_id = service.probe_plan(sqlite_store, doc).plan_id
        return service.probe_run(sqlite_store, plan_id, REFUSAL_POLICY_ID, runtime=runtime)

    return _probe
