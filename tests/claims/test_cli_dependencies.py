"""Dependencies track what a claim rests on, checked through the CLI: a content-bearing
glob, a location-free python_symbol, the executable bit of an exact_blob."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from .helpers import PARSE_PY, WorkTree, claim_request
from .test_cli import cli, root

__all__ = ["root"]  # the fixture, re-exported for pytest


def claim_on(root: Path, snap: str, dependency: dict[str, object]) -> str:
    created = cli(root, "claim", "create", "-", "--json",
                  stdin=json.dumps(claim_request(snap, dependency)))  # fmt: skip
    assert created.exit_code == 0, created.output
    return str(json.loads(created.stdout)["claim_id"])


def state_at(root: Path, claim_id: str, snap: str) -> str:
    checked = cli(root, "claim", "check", claim_id, "--snapshot", snap, "--json")
    assert checked.exit_code == 0, checked.output
    return str(json.loads(checked.stdout)[0]["state"])


def glob(kind: str) -> dict[str, object]:
    return {"query_set": {"query": {"kind": kind, "domain": "tests/*.py"}}}


def test_content_glob_reopens_on_an_edit_path_glob_does_not(tree: WorkTree, root: Path) -> None:
    """Editing a matched file reopens a content_glob claim; path_glob tracks membership."""
    start = tree.write("tests/test_a.py", "def test_a():\n    assert True\n").capture()
    content = claim_on(root, start, glob("content_glob"))
    members = claim_on(root, start, glob("path_glob"))
    edited = tree.write("tests/test_a.py", "def test_a():\n    assert False\n").capture()
    assert (state_at(root, content, edited), state_at(root, members, edited)) == (
        "needs_recheck", "current",
    )  # fmt: skip


SYMBOL = {"query_set": {"query": {"kind": "python_symbol", "name": "parse",
                                  "role": "definition", "domain": "src/**/*.py"}}}  # fmt: skip


@pytest.mark.parametrize(
    ("edited", "expected"),
    [
        ("# a comment line above\n" + PARSE_PY, "current"),
        ("def helper():\n    return 1\n\n\n" + PARSE_PY, "current"),
        (PARSE_PY.replace("text.split(',')", "text.split(';')"), "needs_recheck"),
    ],
    ids=["comment-above", "moved-down", "body-edited"],
)
def test_python_symbol_compares_the_definition_not_its_place(
    tree: WorkTree, root: Path, edited: str, expected: str
) -> None:
    """Moving a function or commenting above it keeps the claim; editing its body reopens."""
    start = tree.write("src/parse.py", PARSE_PY).capture()
    claim_id = claim_on(root, start, SYMBOL)
    assert state_at(root, claim_id, tree.write("src/parse.py", edited).capture()) == expected


def test_exact_blob_tracks_the_executable_bit(tree: WorkTree, root: Path) -> None:
    """chmod +x alone reopens an exact_blob claim."""
    start = tree.write("run.sh", "echo hi\n").capture()
    claim_id = claim_on(root, start, {"exact_blob": {"path": "run.sh"}})
    os.chmod(tree.root / "run.sh", 0o755)  # noqa: S103 - the change under test
    assert state_at(root, claim_id, tree.capture()) == "needs_recheck"


def test_withdrawing_closes_its_obligations(tree: WorkTree, root: Path) -> None:
    """claim withdraw leaves no open obligation behind."""
    start = tree.write("src/parse.py", PARSE_PY).capture()
    claim_id = claim_on(root, start, {"exact_blob": {"path": "src/parse.py"}})
    end = tree.write("src/parse.py", "changed\n").capture()
    assert cli(root, "change", "analyze", start, end).exit_code == 0
    assert cli(root, "claim", "withdraw", claim_id, "--rationale", "obsolete").exit_code == 0
    listed = json.loads(cli(root, "obligations", "list", "--json").stdout)
    assert [(o["state"], o["resolution"]) for o in listed] == [("resolved", "withdrawn")]
