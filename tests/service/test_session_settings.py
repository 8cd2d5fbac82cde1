"""A session's configuration reaches every operation: ``ProbeService(policy_file=…)`` is the
policy file ``probe_run`` and the revocation check read, whatever the process environment
names (docs/ARCHITECTURE.md, "Settings")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from probe_service.errors import ReceiptInvalid
from probe_service.plans.persist import load_envelope
from probe_service.plans.run import probe_abandon
from probe_service.plans.signing import create_key_pair, load_signing_key
from probe_service.policies import PolicyFile, load_policy_file, policy_digest
from probe_service.service import ProbeService
from probe_service.store import Store

POLICY_ID = "session-policy"


def _policy(timeout: int) -> dict[str, Any]:
    return {
        "id": POLICY_ID,
        "allowed_executables": ["python3"],
        "timeout_seconds": timeout,
        "max_output_bytes": 1000,
        "allowed_domains": [],
        "environment": [],
    }


def _write(path: Path, document: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document), encoding="utf-8")
    path.chmod(0o600)
    return path


@pytest.fixture
def two_policy_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """The session's file, and another one under the same policy id that the process
    environment names (what a run must never use)."""
    mine = _write(tmp_path / "mine" / "policies.json", {"schema": 1, "policies": [_policy(10)]})
    other = _write(tmp_path / "env" / "policies.json", {"schema": 1, "policies": [_policy(20)]})
    monkeypatch.setenv("BYTE_PROBE_POLICY_FILE", str(other))
    monkeypatch.delenv("PROBE_REDIS_URL", raising=False)
    return mine, other


def _plan(svc: ProbeService, repo: Path, executable: str, args: list[str]) -> str:
    """Capture ``repo`` and store a plan running ``executable args`` on it; its id."""
    repo.mkdir(exist_ok=True)
    (repo / "a.txt").write_text("a\n", encoding="utf-8")
    plan = {
        "snapshot_id": svc.snapshot_capture(root=str(repo)).snapshot_id,
        "policy_id": POLICY_ID,
        "executable": executable,
        "args": args,
        "oracle": {
            "check": {"kind": "exit_code", "equals": 0},
            "source": "user_requirement",
            "reference": "settings",
        },
    }
    return svc.probe_plan(plan=plan).plan_id


def _digest(path: Path) -> str:
    (policy,) = load_policy_file(path).policies
    return policy_digest(policy)


def test_probe_run_runs_under_the_sessions_policy_file(
    sqlite_store: Store, tmp_path: Path, two_policy_files: tuple[Path, Path]
) -> None:
    """``ProbeService(policy_file=A)``: ``probe_run`` runs under A's policy, not under the
    file the environment names (the bug: `probe_run` re-read the environment)."""
    mine, other = two_policy_files
    assert _digest(mine) != _digest(other)
    svc = ProbeService(sqlite_store, policy_file=mine)
    # Not allowed by either policy: the run is refused before anything launches, and its
    # receipt still names the policy it was decided under. (A session with the policy would
    # refuse the plan itself; one without a policy file stores it unchecked.)
    unchecked = ProbeService(sqlite_store, policy_file=tmp_path / "absent.json")
    plan_id = _plan(unchecked, tmp_path / "repo", "sh", ["-c", "exit 0"])
    result = svc.probe_run(plan_id=plan_id, policy_id=POLICY_ID, via="embedded")
    assert result.receipt.committed.policy_digest == _digest(mine)


def _signed_envelope(store: Store, key_dir: Path) -> tuple[dict[str, Any], str, str]:
    """A stored signed receipt's envelope, the signer's public key (PEM) and fingerprint."""
    private, public, fingerprint = create_key_pair(key_dir)
    policies = PolicyFile.model_validate({"schema": 1, "policies": [_policy(10)]})
    plan_id = _plan(ProbeService(store), key_dir.parent / "repo", "python3", [])
    result = probe_abandon(
        store,
        plan_id,
        POLICY_ID,
        policy_file=policies,
        run_id="r1",
        reason="worker_lost",
        detail="test",
        worker="w",
        signing_key=load_signing_key(private),
    )
    return load_envelope(store, result.receipt_sha256), public.read_text(), fingerprint


def test_revocations_come_from_the_sessions_policy_file(
    sqlite_store: Store, tmp_path: Path, two_policy_files: tuple[Path, Path]
) -> None:
    """A key the session's policy file revokes never verifies in ``receipt_verify``, though
    the file the environment names revokes nothing (the bug: the check re-read it)."""
    envelope, public_pem, fingerprint = _signed_envelope(sqlite_store, tmp_path / "keys")
    revoking = _write(
        tmp_path / "revoking" / "policies.json",
        {"schema": 2, "policies": [_policy(10)], "revoked_signing_keys": [fingerprint]},
    )
    trusting = ProbeService(sqlite_store)  # the environment's file: nothing revoked
    verified = trusting.receipt_verify(document=envelope, public_keys=(public_pem,))
    assert verified.signer == fingerprint
    svc = ProbeService(sqlite_store, policy_file=revoking)
    with pytest.raises(ReceiptInvalid, match=f"key {fingerprint} is revoked"):
        svc.receipt_verify(document=envelope, public_keys=(public_pem,))


def test_a_probe_sees_the_environment_the_session_started_with(
    sqlite_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A variable the policy passes has the value it had when the session's settings were
    read: changing the process environment later does not reach the probe (a real run)."""
    document = {**_policy(30), "allowed_executables": ["sh"], "environment": ["PROBE_TEST_FLAG"]}
    policies = _write(tmp_path / "policies.json", {"schema": 1, "policies": [document]})
    monkeypatch.setenv("PROBE_TEST_FLAG", "at-start")
    monkeypatch.delenv("PROBE_REDIS_URL", raising=False)
    svc = ProbeService(sqlite_store, policy_file=policies)
    monkeypatch.setenv("PROBE_TEST_FLAG", "changed-later")
    plan_id = _plan(svc, tmp_path / "repo", "sh", ["-c", 'test "$PROBE_TEST_FLAG" = at-start'])
    result = svc.probe_run(plan_id=plan_id, policy_id=POLICY_ID, via="embedded", reuse=False)
    assert (result.outcome, result.reason) == ("supports", "oracle_passed"), result.receipt
