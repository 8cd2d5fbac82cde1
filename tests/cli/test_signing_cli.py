"""`key create`, `receipt export --format intoto` and `receipt verify --key`."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from probe_service.cli import main
from probe_service.plans import parse_plan, probe_abandon, save_plan
from probe_service.plans.signing import load_signing_key
from probe_service.policies import PolicyFile
from probe_service.store import open_store

from ..plans.conftest import TEST_POLICY as POLICY

PLAN = {
    "snapshot_id": "a" * 64,
    "policy_id": "test-policy",
    "executable": "python3",
    "args": ["-c", "print(1)"],
    "oracle": {
        "check": {"kind": "exit_code", "equals": 0},
        "source": "user_requirement",
        "reference": "issue 18",
    },
}


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def signed(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]
) -> tuple[Path, Path, str]:
    """(store root, public key, receipt sha) of a receipt signed by a key from `key create`."""
    keys = tmp_path_factory.mktemp("keys")
    code, out, _ = _run(capsys, "key", "create", "--out", str(keys), "--json")
    assert code == 0
    created = json.loads(out)
    key = load_signing_key(Path(created["private_key"]))
    assert key.fingerprint == created["keyid"]
    root = tmp_path / "state"
    root.mkdir()
    store = open_store(root)
    try:
        plan_id, _ = save_plan(store, parse_plan(PLAN))
        result = probe_abandon(
            store,
            plan_id,
            "test-policy",
            policy_file=PolicyFile.model_validate({"schema": 1, "policies": [POLICY]}),
            run_id="r1",
            reason="worker_lost",
            detail="test",
            worker="w",
            signing_key=key,
        )
    finally:
        store.close()
    return root, Path(created["public_key"]), result.receipt_sha256


def test_export_then_verify_with_key(
    signed: tuple[Path, Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An exported envelope verifies with the public key and names its signer; without a key
    it is "unsigned-verified only"."""
    root, public, sha = signed
    out_file = tmp_path / "r.intoto.json"
    code, _, err = _run(
        capsys, "receipt", "export", sha, "--format", "intoto", "--out", str(out_file),
        "--root", str(root),
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(out_file.read_text())["payloadType"] == "application/vnd.in-toto+json"
    code, out, _ = _run(capsys, "receipt", "verify", str(out_file), "--key", str(public))
    assert code == 0
    assert f"receipt {sha} verifies: signed by " in out
    code, out, _ = _run(capsys, "receipt", "verify", str(out_file))
    assert code == 0
    assert "unsigned-verified only" in out


def test_tampered_envelope_exits_1_one_line(
    signed: tuple[Path, Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tampered envelope exits 1 with one stderr line naming the signature, no traceback."""
    root, public, sha = signed
    _, text, _ = _run(capsys, "receipt", "export", sha, "--root", str(root))
    envelope = json.loads(text)
    statement = json.loads(base64.b64decode(envelope["payload"]))
    statement["predicate"]["committed"]["outcome"] = "supports"
    envelope["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(envelope))
    code, out, err = _run(capsys, "receipt", "verify", str(bad), "--key", str(public))
    assert code == 1
    assert "signature: does not verify" in err
    assert err.count("\n") == 1
    assert "Traceback" not in err
    assert out == ""


def test_loose_public_path_and_missing_envelope(
    signed: tuple[Path, Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A key that does not exist is refused (exit 3) naming it; an unsigned receipt has no
    envelope to export; an unknown format is refused."""
    root, _, sha = signed
    code, _, err = _run(capsys, "receipt", "export", sha, "--format", "slsa", "--root", str(root))
    assert code == 3
    assert "slsa" in err
    missing = tmp_path / "nope.pem"
    envelope = tmp_path / "e.json"
    _, text, _ = _run(capsys, "receipt", "export", sha, "--root", str(root))
    envelope.write_text(text)
    code, _, err = _run(capsys, "receipt", "verify", str(envelope), "--key", str(missing))
    assert code == 3
    assert str(missing) in err
    assert err.count("\n") == 1


def test_revoked_key_refused_by_verify(
    signed: tuple[Path, Path, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A fingerprint revoked in the policy file makes `verify --key` refuse, naming it."""
    root, public, sha = signed
    envelope = tmp_path / "e.json"
    _, text, _ = _run(capsys, "receipt", "export", sha, "--root", str(root))
    envelope.write_text(text)
    keyid = json.loads(text)["signatures"][0]["keyid"]
    policies = tmp_path / "policies.json"
    document = {"schema": 2, "policies": [POLICY], "revoked_signing_keys": [keyid]}
    policies.write_text(json.dumps(document))
    monkeypatch.setenv("BYTE_PROBE_POLICY_FILE", str(policies))
    code, _, err = _run(capsys, "receipt", "verify", str(envelope), "--key", str(public))
    assert code == 1
    assert f"key {keyid} is revoked" in err
