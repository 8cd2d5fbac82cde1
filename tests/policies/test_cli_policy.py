"""The `policy check` typer sub-app."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from probe_service.cli.policy import app

from .conftest import Writer, document


def test_check_json_lists_ids_and_digests(write_policy_file: Writer) -> None:
    """--json prints the file and each policy's id and digest."""
    path = write_policy_file(document())
    result = CliRunner().invoke(app, ["check", "--file", str(path), "--json"])
    assert result.exit_code == 0
    payload = json.loads(result.stdout)
    assert payload["file"] == str(path)
    assert [p["id"] for p in payload["policies"]] == ["local-python-no-network"]
    assert len(payload["policies"][0]["digest"]) == 64


def test_check_table_names_the_policy(write_policy_file: Writer) -> None:
    """Human mode prints a table containing each policy id."""
    result = CliRunner().invoke(app, ["check", "--file", str(write_policy_file(document()))])
    assert result.exit_code == 0
    assert "local-python-no-network" in result.stdout


def test_check_failure_is_one_line_exit_1(write_policy_file: Writer) -> None:
    """A bad file exits 1 with a single 'error:' line and no traceback."""
    path = write_policy_file(document(schema=4))
    result = CliRunner().invoke(app, ["check", "--file", str(path)])
    assert result.exit_code == 1
    assert result.output.startswith("error: ")
    assert result.output.count("\n") == 1
    assert "Traceback" not in result.output


def test_a_policy_that_could_fill_the_file_table_is_refused(write_policy_file: Writer) -> None:
    """max_processes x max_open_files over half of this machine's fs.file-max: exit 1, one
    line naming the policy, the sysctl and the numbers."""
    file_max = int(Path("/proc/sys/fs/file-max").read_text())
    files = min(65536, file_max // 4096 + 1)
    assert 4096 * files > file_max // 2, "this machine's fs.file-max is too large for the test"
    doc = document(schema=3)
    doc["policies"][0].update(max_processes=4096, max_open_files=files)
    result = CliRunner().invoke(app, ["check", "--file", str(write_policy_file(doc))])
    assert result.exit_code == 1
    assert result.output.count("\n") == 1
    assert "local-python-no-network" in result.output
    assert "fs.file-max" in result.output
    assert str(4096 * files) in result.output


def test_the_default_limits_pass_on_this_machine(write_policy_file: Writer) -> None:
    """A policy without max_processes and max_open_files (256 x 1,024) passes the check."""
    result = CliRunner().invoke(app, ["check", "--file", str(write_policy_file(document()))])
    assert result.exit_code == 0, result.output
