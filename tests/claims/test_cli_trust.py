"""Through the CLI, where a user meets them: evidence bound to its snapshot, refused
rechecks, the gate on one snapshot, incomplete baselines."""

from __future__ import annotations

import json
import os
from pathlib import Path

from typer.testing import Result

from probe_service.principals import user_name

from .helpers import PARSE_PY, WorkTree, claim_request, stored_receipt
from .test_cli import cli, root

__all__ = ["root"]  # the fixture, re-exported for pytest


def one_line_error(result: Result, *words: str) -> None:
    stderr = result.stderr
    assert result.exit_code == 3, stderr
    assert len(stderr.strip().splitlines()) == 1
    assert "Traceback" not in stderr
    for word in words:
        assert word in stderr


def create(root: Path, request: dict[str, object], *flags: str) -> Result:
    return cli(root, "claim", "create", "-", "--json", *flags, stdin=json.dumps(request))


def test_receipt_from_another_snapshot_is_refused(tree: WorkTree, root: Path) -> None:
    """claim create names the receipt and both snapshots, one line, exit 3."""
    other = tree.write("src/parse.py", "x = 1\n").capture()
    receipt = stored_receipt(tree.store, "supports", other)
    snap = tree.write("src/parse.py", PARSE_PY).capture()
    refused = create(root, claim_request(snap, evidence=[{"receipt": receipt}]))
    one_line_error(refused, receipt, other, snap)


def test_identical_claim_twice_is_one_claim(tree: WorkTree, root: Path) -> None:
    """The second create prints the first claim's id; one live claim exists."""
    snap = tree.write("src/parse.py", PARSE_PY).capture()
    first = json.loads(create(root, claim_request(snap)).stdout)
    second = json.loads(create(root, claim_request(snap)).stdout)
    assert first["claim_id"] == second["claim_id"]


def test_incomplete_baseline_needs_the_explicit_flag(tree: WorkTree, root: Path) -> None:
    """A claim that would never be applicable is refused unless --allow-incomplete."""
    snap = tree.write("src/bad.py", "def (:\n").capture()
    query = {"kind": "python_symbol", "name": "legacy", "domain": "src/**/*.py"}
    request = claim_request(snap, {"negative_query": {"query": query}})
    one_line_error(create(root, request), "incomplete", "--allow-incomplete")
    assert create(root, request, "--allow-incomplete").exit_code == 0


def test_refuting_recheck_refused_and_reverted_gate_passes(tree: WorkTree, root: Path) -> None:
    """The README walkthrough: a refuting recheck is refused, pointing at supersession; the
    gate on the reverted snapshot passes with no manual resolution."""
    start = tree.write("src/parse.py", PARSE_PY).capture()
    receipt = stored_receipt(tree.store, "supports", start, run_id="r1")
    created = create(root, claim_request(start, evidence=[{"receipt": receipt}]))
    assert created.exit_code == 0, created.output
    end = tree.write("src/parse.py", "def parse(t):\n    return [t]\n").capture()
    closed = cli(root, "gate", "--snapshot", end)
    assert closed.exit_code == 1
    assert "the whole store" in closed.stdout
    (obligation,) = json.loads(cli(root, "obligations", "list", "--open", "--json").stdout)
    refutes = stored_receipt(tree.store, "refutes", end, run_id="r2")
    refused = cli(root, "obligations", "resolve", obligation["obligation_id"],
                  "--resolution", "rechecked", "--rationale", "reran",
                  "--receipt", refutes)  # fmt: skip
    one_line_error(refused, "refutes", "supersed")
    reverted = tree.write("src/parse.py", PARSE_PY).capture()
    assert cli(root, "gate", "--snapshot", reverted, "--scope", "payments").exit_code == 0


def test_accepted_risk_needs_a_rationale_and_is_listed(tree: WorkTree, root: Path) -> None:
    """accepted_risk without a rationale is refused; the gate lists it as accepted risk."""
    start = tree.write("src/parse.py", PARSE_PY).capture()
    create(root, claim_request(start))
    end = tree.write("src/parse.py", "changed\n").capture()
    cli(root, "change", "analyze", start, end)
    (obligation,) = json.loads(cli(root, "obligations", "list", "--open", "--json").stdout)
    oid = obligation["obligation_id"]
    base = ["obligations", "resolve", oid, "--resolution", "accepted_risk"]
    one_line_error(cli(root, *base, "--rationale", " "), "rationale")
    done = cli(root, *base, "--rationale", "doc-only", "--json")
    # Who resolves is the OS user running the CLI, never a flag.
    assert json.loads(done.stdout)["resolved_by"] == user_name(os.getuid())
    assert json.loads(done.stdout)["interface"] == "cli"
    gated = cli(root, "gate", "--snapshot", end, "--scope", "payments")
    assert gated.exit_code == 0
    assert f"accepted risk (not checked): {oid}" in gated.stdout


def test_events_consumer_resumes_after_its_ack(tree: WorkTree, root: Path) -> None:
    """events --consumer NAME resumes after the cursor NAME acknowledged."""
    from typer.testing import CliRunner

    from probe_service.cli.main import app as main_app

    def events(*extra: str) -> list[dict[str, object]]:
        done = CliRunner().invoke(main_app, ["events", "--root", str(root), "--json", *extra])
        assert done.exit_code == 0, done.output
        return list(json.loads(done.stdout))

    tree.write("a", "1").capture()
    tree.write("a", "2").capture()
    seen = events("--consumer", "bot")
    assert events("--consumer", "bot") == seen
    cursor = str(seen[-1]["cursor"])
    assert events("--consumer", "bot", "--ack", cursor) == []
    assert events("--consumer", "bot") == []
