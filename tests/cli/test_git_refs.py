"""The CLI over refs: ``snapshot capture --ref``, ``snapshot show``'s attribute notes,
``gate --base --head`` (a CI job's one command), ``change analyze`` and ``claim check``
with refs, and bad refs as one stderr line with exit 3."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from probe_service.cli.main import app

from ..snapshot.gitrepos import commit_all, git, init_repo, write

runner = CliRunner()


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository (the CLI's --root too) with a base and a head commit."""
    monkeypatch.delenv("PROBE_DATABASE_URL", raising=False)
    monkeypatch.delenv("BYTE_PROBE_CAPTURE_ROOTS", raising=False)
    root = init_repo(tmp_path / "repo")
    write(root, ".gitignore", b".zyte/\n")
    write(root, "src/parse.py", b"def parse(t):\n    return t\n")
    write(root, ".gitattributes", b"*.py eol=lf\n")
    commit_all(root, "base")
    write(root, "src/parse.py", b"def parse(t):\n    return t.strip()\n")
    commit_all(root, "head")
    return root


def cli(repo: Path, *args: str, stdin: str | None = None) -> object:
    return runner.invoke(app, [*args, "--root", str(repo)], input=stdin)


def _claim_on(repo: Path, ref: str) -> tuple[str, str]:
    captured = cli(repo, "snapshot", "capture", str(repo), "--ref", ref, "--json")
    assert captured.exit_code == 0, captured.output  # type: ignore[attr-defined]
    snapshot_id = json.loads(captured.stdout)["snapshot_id"]  # type: ignore[attr-defined]
    request = {
        "scope": "payments",
        "statement": "parse returns its input",
        "kind": "behavior",
        "snapshot_id": snapshot_id,
        "dependencies": [{"exact_blob": {"path": "src/parse.py"}}],
    }
    created = cli(repo, "claim", "create", "-", "--json", stdin=json.dumps(request))
    assert created.exit_code == 0, created.output  # type: ignore[attr-defined]
    return snapshot_id, json.loads(created.stdout)["claim_id"]  # type: ignore[attr-defined]


def test_capture_ref_and_show_notes(repo: Path) -> None:
    """--ref captures the tree with its git source; show names the rewriting attribute."""
    done = cli(repo, "snapshot", "capture", str(repo), "--ref", "main~1", "--json")
    assert done.exit_code == 0, done.output  # type: ignore[attr-defined]
    result = json.loads(done.stdout)  # type: ignore[attr-defined]
    assert result["git"]["ref"] == "main~1"
    assert result["git"]["tree"] == git(repo, "rev-parse", "main~1^{tree}")
    shown = cli(repo, "snapshot", "show", result["snapshot_id"], "--json")
    notes = json.loads(shown.stdout)["attribute_notes"]  # type: ignore[attr-defined]
    assert len(notes) == 1
    assert notes[0].startswith(".gitattributes:1: *.py eol=lf")
    table = cli(repo, "snapshot", "show", result["snapshot_id"])
    assert "git attributes: .gitattributes:1" in table.stdout  # type: ignore[attr-defined]


def test_gate_base_head_fails_then_passes(repo: Path) -> None:
    """gate --base --head exits 1 naming the obligation the change opened, and 0 once it
    is resolved; on an unchanged change it passes."""
    _, claim_id = _claim_on(repo, "main~1")
    closed = cli(repo, "gate", "--base", "main~1", "--head", "main", "--scope", "payments")
    assert closed.exit_code == 1, closed.output  # type: ignore[attr-defined]
    assert "1 changed path(s)" in closed.stdout  # type: ignore[attr-defined]
    assert claim_id in closed.stdout  # type: ignore[attr-defined]
    gated = cli(repo, "gate", "--base", "main~1", "--head", "main", "--json")
    body = json.loads(gated.stdout)  # type: ignore[attr-defined]
    assert body["change"]["changed_paths"] == ["src/parse.py"]
    obligation = body["report"]["open_obligations"][0]["obligation_id"]
    resolved = cli(repo, "obligations", "resolve", obligation, "--resolution", "accepted_risk",
                   "--rationale", "reviewed")  # fmt: skip
    assert resolved.exit_code == 0, resolved.output  # type: ignore[attr-defined]
    passed = cli(repo, "gate", "--base", "main~1", "--head", "main", "--scope", "payments")
    assert passed.exit_code == 0, passed.output  # type: ignore[attr-defined]
    same = cli(repo, "gate", "--base", "main~1", "--head", "main~1", "--scope", "payments")
    assert same.exit_code == 0, same.output  # type: ignore[attr-defined]


def test_change_analyze_and_claim_check_take_refs(repo: Path) -> None:
    """change analyze --base/--head and claim check --ref work without snapshot ids."""
    _, claim_id = _claim_on(repo, "main~1")
    analyzed = cli(repo, "change", "analyze", "--base", "main~1", "--head", "main", "--json")
    assert json.loads(analyzed.stdout)["changed_paths"] == ["src/parse.py"]  # type: ignore[attr-defined]
    checked = cli(repo, "claim", "check", claim_id, "--ref", "main", "--json")
    assert json.loads(checked.stdout)[0]["state"] == "needs_recheck"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("gate", "--base", "main", "--head", "nope"), "'nope'"),
        (("gate", "--base", "main"), "--head (with or without --base)"),
        (("snapshot", "capture", "{repo}", "--ref", "HEAD:src"), "HEAD:src"),
        (("change", "analyze", "--base", "nope", "--head", "main"), "'nope'"),
    ],
)
def test_bad_refs_are_one_line_exit_3(repo: Path, args: tuple[str, ...], named: str) -> None:
    """A bad ref or a half-given change is one stderr line naming it, exit 3."""
    _claim_on(repo, "main")
    argv = [arg.replace("{repo}", str(repo)) for arg in args]
    done = runner.invoke(app, [*argv, "--root", str(repo)])
    assert done.exit_code == 3, done.output
    assert named in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
