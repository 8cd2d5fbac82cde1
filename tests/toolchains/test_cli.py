"""`byte-probe toolchain create|digest` and `policy check` over pins and toolchains."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from probe_service.cli.main import main
from probe_service.service import ADMIN, ProbeService, operations

from .conftest import BASE_PYTHON, PolicyWriter, make_tree, policy_entry


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


class TestDigestCommand:
    def test_digest_prints_the_tree_digest_and_base_interpreter(
        self, tree: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """`toolchain digest DIR --json` prints the digest, counts and external targets."""
        code, out, _ = _run(capsys, "toolchain", "digest", str(tree), "--json")
        assert code == 0
        shown = json.loads(out)
        assert len(shown["sha256"]) == 64
        assert (shown["files"], shown["links"]) == (2, 1)
        assert shown["external"][0]["path"] == os.path.realpath(BASE_PYTHON)

    def test_digest_of_a_writable_tree_is_refused(
        self, tree: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A group-writable root is refused with one line naming it."""
        tree.chmod(0o775)
        code, out, err = _run(capsys, "toolchain", "digest", str(tree))
        assert code != 0
        assert out == ""
        assert err.count("\n") == 1
        assert "group- or world-writable" in err


class TestCreateCommand:
    def test_create_inside_a_repository_writes_nothing(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """`toolchain create --dest` inside a git work tree is refused; nothing is created."""
        repo = tmp_path / "repo"
        (repo / ".git").mkdir(parents=True)
        requirements = tmp_path / "requirements.txt"
        requirements.write_text("pytest\n")
        dest = repo / "tools" / "venv"
        code, _, err = _run(
            capsys,
            "toolchain",
            "create",
            "py",
            "--python",
            str(BASE_PYTHON),
            "--requirements",
            str(requirements),
            "--dest",
            str(dest),
        )
        assert code != 0
        assert "inside a repository" in err
        assert not (repo / "tools").exists()

    def test_create_never_overwrites(
        self, tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """An existing --dest is refused and left as it was."""
        requirements = tmp_path / "requirements.txt"
        requirements.write_text("pytest\n")
        before = sorted(p.name for p in tree.iterdir())
        code, _, err = _run(
            capsys,
            "toolchain",
            "create",
            "py",
            "--python",
            str(BASE_PYTHON),
            "--requirements",
            str(requirements),
            "--dest",
            str(tree),
        )
        assert code != 0
        assert "already exists" in err
        assert sorted(p.name for p in tree.iterdir()) == before


class TestPolicyCheck:
    def test_check_prints_pin_and_toolchain_digests(
        self, tree: Path, write_policy: PolicyWriter, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Every pin and toolchain is verified and printed with its digest."""
        pins = {"sh": "/usr/bin/dash", "python3": f"{tree}/bin/python"}
        path = write_policy(policy_entry(toolchains={"small": str(tree)}, executable_pins=pins))
        code, out, _ = _run(capsys, "policy", "check", "--file", str(path), "--json")
        assert code == 0
        report = json.loads(out)["policies"][0]
        assert [t["name"] for t in report["toolchains"]] == ["small"]
        assert len(report["toolchains"][0]["sha256"]) == 64
        python = next(pin for pin in report["pins"] if pin["executable"] == "python3")
        assert (python["toolchain"], python["resolved"]) == ("small", os.path.realpath(BASE_PYTHON))

    def test_toolchain_the_probe_cannot_reach_is_refused_clearly(
        self, tmp_path: Path, write_policy: PolicyWriter, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A toolchain under an owner-only directory (like /root) is refused naming it."""
        private = tmp_path / "private"
        root = make_tree(private / "venv")
        private.chmod(0o700)
        path = write_policy(policy_entry(toolchains={"small": str(root)}))
        code, _, err = _run(capsys, "policy", "check", "--file", str(path))
        assert code == 1
        assert f"{private} (mode drwx------" in err
        assert "not reachable by the probe uid" in err
        assert "probes run as uids 61000-61255" in err

    def test_missing_toolchain_is_refused(
        self, tmp_path: Path, write_policy: PolicyWriter, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A declared toolchain that does not exist fails the check, naming it."""
        path = write_policy(policy_entry(toolchains={"small": str(tmp_path / "absent")}))
        code, _, err = _run(capsys, "policy", "check", "--file", str(path))
        assert code == 1
        assert "toolchain 'small'" in err
        assert "No such file or directory" in err

    def test_pin_that_is_not_a_regular_file_is_refused(
        self, tmp_path: Path, write_policy: PolicyWriter, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A pin naming a directory fails the check, naming the pin."""
        pins = {"sh": str(tmp_path)}
        path = write_policy(policy_entry(executable_pins=pins))
        code, _, err = _run(capsys, "policy", "check", "--file", str(path))
        assert code == 1
        assert "pin for 'sh'" in err


class TestOperationTable:
    def test_toolchain_operations_are_admin_only(self) -> None:
        """toolchain_create/_digest and policy_check are admin rows: never on host or MCP."""
        rows = {op.name: op for op in operations()}
        for name in ("toolchain_create", "toolchain_digest", "policy_check"):
            assert rows[name].faces == ADMIN
        assert not {"toolchain_create", "toolchain_digest"} & {op.name for op in operations("host")}

    def test_policy_check_row_verifies_toolchains(
        self, tree: Path, tmp_path: Path, write_policy: PolicyWriter
    ) -> None:
        """The Python face's policy_check reports each toolchain's digest, like the CLI."""
        path = write_policy(policy_entry(toolchains={"small": str(tree)}))
        (tmp_path / "state").mkdir()
        with ProbeService.open(tmp_path / "state") as svc:
            checked = svc.call("policy_check", {"file": str(path)})
            digest = svc.call("toolchain_digest", {"path": str(tree)})
        assert checked["policies"][0]["toolchains"][0]["sha256"] == digest["sha256"]
