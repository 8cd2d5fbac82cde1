"""The claims CLI sub-apps, mounted the way the main app mounts them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from probe_service.cli.claims import (
    change_app,
    claim_app,
    gate_command,
    knowledge_app,
    obligations_app,
)
from probe_service.cli.main import app as main_app

from .helpers import PARSE_PY, WorkTree, claim_request

app = typer.Typer()
app.add_typer(claim_app, name="claim")
app.add_typer(change_app, name="change")
app.add_typer(obligations_app, name="obligations")
app.add_typer(knowledge_app, name="knowledge")
app.command("gate")(gate_command)

runner = CliRunner()


@pytest.fixture
def root(tree: WorkTree, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("PROBE_DATABASE_URL", raising=False)
    return tree.root.parent / "state"


def cli(root: Path, *args: str, stdin: str | None = None) -> typer.testing.Result:
    # Through the root app: it is the one place errors become exit codes and stderr lines.
    return runner.invoke(main_app, [*args, "--root", str(root)], input=stdin)


def test_every_command_has_an_example() -> None:
    """Each command's help carries an ``Example:`` line."""
    group = typer.main.get_command(app)
    missing = []
    for name, sub in getattr(group, "commands", {}).items():
        nested = getattr(sub, "commands", None)
        commands = nested.items() if nested is not None else [(name, sub)]
        missing += [n for n, c in commands if "Example:" not in (c.help or "")]
    assert len(getattr(group, "commands", {})) == 5
    assert missing == []


def test_create_check_analyze_list_resolve_gate(tree: WorkTree, root: Path) -> None:
    """The whole flow through the CLI: the gate closes on a stale claim and reopens."""
    start = tree.write("src/parse.py", PARSE_PY).capture()
    created = cli(root, "claim", "create", "-", "--json", stdin=json.dumps(claim_request(start)))
    assert created.exit_code == 0, created.output
    claim_id = json.loads(created.stdout)["claim_id"]
    end = tree.write("src/parse.py", "changed\n").capture()
    checked = cli(root, "claim", "check", claim_id, "--snapshot", end, "--json")
    assert json.loads(checked.stdout)[0]["state"] == "needs_recheck"
    assert cli(root, "change", "analyze", start, end).exit_code == 0
    listed = json.loads(cli(root, "obligations", "list", "--open", "--json").stdout)
    assert [(o["claim_id"], o["state"]) for o in listed] == [(claim_id, "open")]
    closed = cli(root, "gate", "--snapshot", end, "--scope", "payments")
    assert closed.exit_code == 1
    assert listed[0]["obligation_id"] in closed.stdout
    resolved = cli(root, "obligations", "resolve", listed[0]["obligation_id"],
                   "--resolution", "accepted_risk", "--rationale", "reviewed")  # fmt: skip
    assert resolved.exit_code == 0, resolved.output
    assert cli(root, "gate", "--snapshot", end, "--scope", "payments").exit_code == 0


def test_show_and_knowledge_query(tree: WorkTree, root: Path) -> None:
    """show prints the claim; knowledge query finds it by its words."""
    start = tree.write("src/parse.py", PARSE_PY).capture()
    created = cli(root, "claim", "create", "-", "--json", stdin=json.dumps(claim_request(start)))
    claim_id = json.loads(created.stdout)["claim_id"]
    shown = cli(root, "claim", "show", claim_id, "--json")
    assert json.loads(shown.stdout)["statement"] == "parse() accepts a trailing comma"
    found = cli(root, "knowledge", "query", "--scope", "payments", "--snapshot", start,
                "--text", "trailing comma", "--json")  # fmt: skip
    assert [h["claim"]["claim_id"] for h in json.loads(found.stdout)] == [claim_id]


def test_input_error_is_one_line_exit_3(tree: WorkTree, root: Path) -> None:
    """A bad claim is one stderr line and exit 3, without a traceback."""
    result = cli(root, "claim", "create", "-", stdin='{"scope": "payments"}')
    assert result.exit_code == 3
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output


def test_not_json_is_an_input_error(tree: WorkTree, root: Path) -> None:
    """Malformed JSON input exits 3."""
    assert cli(root, "claim", "create", "-", stdin="{nope").exit_code == 3


def test_missing_file_is_an_input_error(tree: WorkTree, root: Path) -> None:
    """An unreadable input file exits 3."""
    assert cli(root, "claim", "create", str(root / "missing.json")).exit_code == 3


def test_json_error_frame(tree: WorkTree, root: Path) -> None:
    """With --json an error also prints a JSON frame on stdout."""
    result = cli(root, "claim", "show", "clm_" + "0" * 32, "--json")  # well formed, not stored
    assert result.exit_code == 3
    assert json.loads(result.stdout)["error"] == "not_found"
