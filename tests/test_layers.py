"""The layers of docs/ARCHITECTURE.md ("Layers") hold: the import-linter contracts in
pyproject.toml are kept, so `make test` (which CI runs) enforces them as `make check` does.

import-linter reads every import, at the top of a module, inside a function or under
TYPE_CHECKING, so a lazy import cannot slip past a contract.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from importlinter.cli import lint_imports

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"

#: The contracts docs/ARCHITECTURE.md describes, by id: removing one is a visible change.
CONTRACTS = {
    "layers",
    "claims-with-typescript",
    "sandbox-with-toolchains",
    "siblings-apart",
    "snapshot-apart",
    "faces-thin",
    "faces-apart",
    "no-cycles",
}


def _contracts() -> list[dict[str, object]]:
    config = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
    contracts: list[dict[str, object]] = config["tool"]["importlinter"]["contracts"]
    return contracts


def test_every_contract_is_declared() -> None:
    """pyproject.toml declares exactly the contracts the architecture page names."""
    assert {str(c["id"]) for c in _contracts()} == CONTRACTS


def test_no_contract_ignores_an_import() -> None:
    """The layers hold without exceptions: no contract lists imports to ignore."""
    assert [c["id"] for c in _contracts() if c.get("ignore_imports")] == []


def test_the_import_contracts_are_kept(capsys: pytest.CaptureFixture[str]) -> None:
    """lint-imports keeps every contract (its report is printed when one breaks)."""
    code = lint_imports(config_filename=str(PYPROJECT), no_cache=True, no_logo=True)
    report = capsys.readouterr().out
    assert code == 0, report
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken." in report
