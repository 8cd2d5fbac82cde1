"""A hostile repository tries to reach host secrets through the plan runner; it must fail."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from probe_service.policies import POLICY_FILE_ENV
from probe_service.sandbox import SandboxRuntime
from probe_service.store import Store

from .. import calls as service
from .conftest import oracle_doc, plan_doc

SECRET = b"host-secret-7f3a9c"


@pytest.fixture
def hostile(
    tmp_path: Path, sqlite_store: Store, monkeypatch: pytest.MonkeyPatch
) -> tuple[str, Path]:
    """A repository whose symlinks point at a host secret, the store and the policy file."""
    secret = tmp_path / "host" / "secret.txt"
    secret.parent.mkdir()
    secret.write_bytes(SECRET)
    policy = tmp_path / "admin" / "probe-policies.json"
    policy.parent.mkdir()
    policy.write_text(
        json.dumps(
            {
                "schema": 1,
                "policies": [
                    {
                        "id": "hostile",
                        "allowed_executables": ["cat"],
                        "timeout_seconds": 10,
                        "max_output_bytes": 10_000,
                        "allowed_domains": [],
                        "environment": [],
                    }
                ],
            }
        )
    )
    policy.chmod(0o600)
    monkeypatch.setenv(POLICY_FILE_ENV, str(policy))
    repo = tmp_path / "repo"
    repo.mkdir()
    os.symlink(secret, repo / "secret")
    os.symlink(policy, repo / "policy")
    os.symlink(sqlite_store.root / ".zyte" / "repository-intelligence.sqlite3", repo / "store")
    return service.snapshot_capture(sqlite_store, repo).snapshot_id, secret


@pytest.mark.parametrize("target", ["secret", "policy", "store"])
def test_repository_links_cannot_read_host_files(
    sqlite_store: Store, runtime: SandboxRuntime, hostile: tuple[str, Path], target: str
) -> None:
    """`cat <link>` to the host secret, policy file or store never runs: the link is refused."""
    snapshot_id, _ = hostile
    plan = plan_doc(
        snapshot_id=snapshot_id,
        policy_id="hostile",
        executable="cat",
        args=[target],
        oracle=oracle_doc({"kind": "stdout_contains", "text": "host-secret"}),
    )
    plan_id = service.probe_plan(sqlite_store, plan).plan_id
    result = service.probe_run(sqlite_store, plan_id, "hostile", runtime=runtime)
    # Absolute links refuse the materialization, naming a link (tracker issue 10, item 6).
    assert (result.status, result.reason) == ("inconclusive", "snapshot_link_escapes")
    assert "has an absolute target" in result.receipt.operational.to_json()["detail"]
    assert SECRET.decode() not in result.stdout + result.stderr
    assert b"SQLite format" not in (result.stdout + result.stderr).encode()
    assert result.outcome == "inconclusive"
