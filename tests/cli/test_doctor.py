"""`byte-probe doctor`: one line per check, the fix for each failing one."""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import CliRunner


class TestDoctor:
    def test_json_lists_every_check(self, cli: CliRunner) -> None:
        """`doctor --json` names each prerequisite once, with ok, detail and fix."""
        code, out, _ = cli("doctor", "--json")
        doc = json.loads(out)
        names = {c["name"] for c in doc["checks"]}
        expected = {"runtime digest", "bubblewrap", "socat", "ripgrep", "cgroups", "policy file"}
        assert expected | {"mechanism", "store (embedded)"} <= names
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
