"""SECURITY.md's attack table names only tests that exist."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEST_REF = re.compile(r"`(tests/[\w/]+\.py)::([\w:]+)`")


def _defined(path: Path) -> set[str]:
    """Every ``Class::test`` and module-level ``test`` defined in a test file."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names.update(
                f"{node.name}::{item.name}"
                for item in node.body
                if isinstance(item, ast.FunctionDef)
            )
    return names


def test_every_row_names_an_existing_test() -> None:
    """Each test SECURITY.md cites exists (file, class and function)."""
    refs = TEST_REF.findall((ROOT / "SECURITY.md").read_text(encoding="utf-8"))
    assert len(refs) >= 25
    missing = [
        f"{file}::{name}"
        for file, name in refs
        if not (ROOT / file).is_file() or name not in _defined(ROOT / file)
    ]
    assert missing == []


def test_every_table_row_has_a_test() -> None:
    """No attack row is left without the test that proves it."""
    text = (ROOT / "SECURITY.md").read_text(encoding="utf-8")
    table = text.split("## Attacks and the tests that prove them", 1)[1]
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows[1:]
    assert all(TEST_REF.search(row) for row in rows[1:])
