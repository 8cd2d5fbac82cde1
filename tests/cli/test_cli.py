"""The CLI: JSON output, one-line errors with exit codes, documented commands."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from probe_service.cli import main
from probe_service.cli.main import COMMANDS, load_command

REPO_ROOT = Path(__file__).resolve().parents[2]


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _commands() -> list[tuple[str, str]]:
    """Every leaf command of the real app (each lazy group loaded) with its help text."""
    found: list[tuple[str, str]] = []

    def walk(command: object, name: str) -> None:
        sub = getattr(command, "commands", None)
        if sub is None:
            found.append((name, getattr(command, "help", None) or ""))
            return
        for child, nested in sub.items():
            walk(nested, f"{name} {child}")

    for name in COMMANDS:
        walk(load_command(name), name)
    return found


class TestSnapshotCommands:
    def test_capture_this_repository_as_json(
        self, capsys: pytest.CaptureFixture[str], tmp_path: Path
    ) -> None:
        """`snapshot capture --json .` on this repository prints id, files and bytes."""
        code, out, _ = _run(
            capsys, "snapshot", "capture", str(REPO_ROOT), "--root", str(tmp_path), "--json"
        )
        doc = json.loads(out)
        assert code == 0
        assert len(doc["snapshot_id"]) == 64
        assert doc["files"] > 10
        assert doc["bytes"] > 0

    def test_show_and_materialize(
        self, capsys: pytest.CaptureFixture[str], tmp_path: Path, repo: Path
    ) -> None:
        """A captured snapshot can be shown and rebuilt through the CLI."""
        (repo / "f.txt").write_text("hello")
        _, out, _ = _run(
            capsys, "snapshot", "capture", str(repo), "--root", str(tmp_path), "--json"
        )
        snapshot_id = json.loads(out)["snapshot_id"]
        code, out, _ = _run(
            capsys, "snapshot", "show", snapshot_id, "--root", str(tmp_path), "--json"
        )
        assert code == 0
        assert json.loads(out)["entries"][0]["path"] == "f.txt"
        code, _, _ = _run(
            capsys,
            "snapshot",
            "materialize",
            snapshot_id,
            str(tmp_path / "o"),
            "--root",
            str(tmp_path),
        )
        assert code == 0
        assert (tmp_path / "o" / "f.txt").read_text() == "hello"

    def test_events_lists_capture(
        self, capsys: pytest.CaptureFixture[str], tmp_path: Path, repo: Path
    ) -> None:
        """`events --json` lists the snapshot event after a capture."""
        (repo / "f").write_text("x")
        _run(capsys, "snapshot", "capture", str(repo), "--root", str(tmp_path))
        code, out, _ = _run(capsys, "events", "--after", "0", "--root", str(tmp_path), "--json")
        assert code == 0
        assert [e["kind"] for e in json.loads(out)] == ["snapshot"]


class TestErrors:
    def test_unknown_snapshot_is_one_line_exit_3(
        self, capsys: pytest.CaptureFixture[str], tmp_path: Path
    ) -> None:
        """An unknown id prints one stderr line naming it and exits 3."""
        code, _, err = _run(capsys, "snapshot", "show", "f" * 64, "--root", str(tmp_path))
        assert code == 3
        assert err.count("\n") == 1
        assert "f" * 64 in err

    def test_json_error_frame(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        """With --json an error also prints a JSON frame with a machine-readable code."""
        missing = "0" * 64  # well formed, not stored
        _, out, _ = _run(capsys, "snapshot", "show", missing, "--root", str(tmp_path), "--json")
        assert json.loads(out)["error"] == "not_found"

    def test_malformed_id_is_refused_by_the_table(
        self, capsys: pytest.CaptureFixture[str], tmp_path: Path
    ) -> None:
        """A malformed id gets the table's invalid_input code, naming the field."""
        code, out, err = _run(capsys, "snapshot", "show", "x", "--root", str(tmp_path), "--json")
        assert code == 3
        assert json.loads(out)["error"] == "invalid_input"
        assert "snapshot_id" in err

    def test_usage_error_exit_3(self, capsys: pytest.CaptureFixture[str]) -> None:
        """An unknown command is a one-line usage error with exit 3."""
        code, _, err = _run(capsys, "snapshot", "frobnicate")
        assert code == 3
        assert err.startswith("byte-probe: error:")

    def test_unsafe_state_dir_refused(
        self, capsys: pytest.CaptureFixture[str], tmp_path: Path, repo: Path
    ) -> None:
        """A linked .zyte is refused with one line naming it."""
        (tmp_path / ".zyte").symlink_to(repo)
        code, _, err = _run(capsys, "events", "--root", str(tmp_path))
        assert code == 3
        assert ".zyte" in err

    def test_console_script_prints_no_traceback(self, tmp_path: Path) -> None:
        """The installed entry point exits non-zero with no traceback on an error."""
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "probe_service.cli",
                "snapshot",
                "capture",
                str(tmp_path / "missing"),
                "--root",
                str(tmp_path),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 3
        assert "Traceback" not in done.stderr
        assert done.stderr.startswith("byte-probe: error:")


class TestDocumentation:
    def test_every_command_has_an_example(self) -> None:
        """Every command's help carries an `Example:` line."""
        commands = _commands()
        assert len(commands) >= 30
        missing = [name for name, text in commands if "Example:" not in text]
        assert missing == []
