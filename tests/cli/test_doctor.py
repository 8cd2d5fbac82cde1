"""`byte-probe doctor`: one line per check, the fix for each failing one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import CliRunner


class TestDoctor:
    def test_json_lists_every_check(self, cli: CliRunner) -> None:
        """`doctor --json` names each prerequisite once, with ok, detail and fix."""
        code, out, _ = cli("doctor", "--json")
        doc = json.loads(out)
        names = {c["name"] for c in doc["checks"]}
        expected = {"runtime digest", "bubblewrap", "socat", "ripgrep", "cgroups", "policy file"}
        assert expected | {"mechanism", "store (embedded)", "typescript worker"} <= names
        assert code == (0 if doc["ok"] else 1)
        assert all(c["fix"] for c in doc["checks"] if not c["ok"])

    def test_loose_policy_file_fails_with_its_fix(self, cli: CliRunner, environment: Path) -> None:
        """A group-readable policy file is one failing line naming chmod 600; exit 1."""
        environment.chmod(0o644)
        code, out, _ = cli("doctor")
        lines = out.splitlines()
        assert code == 1
        assert len(lines) <= 40
        (policy,) = [line for line in lines if "policy file" in line]
        assert policy.startswith("FAIL")
        assert "chmod 600" in policy

    def test_signing_key_fingerprint_is_shown(
        self, cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """With a configured key, doctor names its fingerprint; a loose key fails the line."""
        code, out, _ = cli("key", "create", "--out", str(tmp_path / "keys"), "--json", root=False)
        assert code == 0
        created = json.loads(out)
        monkeypatch.setenv("BYTE_PROBE_SIGNING_KEY", created["private_key"])
        _, out, _ = cli("doctor", "--json")
        (line,) = [c for c in json.loads(out)["checks"] if c["name"] == "signing key"]
        assert (line["ok"], created["keyid"] in line["detail"]) == (True, True)
        Path(created["private_key"]).chmod(0o644)
        _, out, _ = cli("doctor", "--json")
        (line,) = [c for c in json.loads(out)["checks"] if c["name"] == "signing key"]
        assert line["ok"] is False
