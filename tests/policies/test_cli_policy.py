"""The `policy check` typer sub-app."""

from __future__ import annotations

import json

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
