"""Fixtures of the turn tests: a real working tree, a session over the SQLite store and an
owner-only policy file the test may fill with postures."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from probe_service.service import ProbeService
from probe_service.settings import read_settings
from probe_service.store import Store

from ..claims.helpers import PARSE_PY, WorkTree

#: Writes the policy file with these ``turn_postures`` (schema 3) and returns its path.
PostureWriter = Callable[[list[dict[str, object]]], Path]


@pytest.fixture
def work(tmp_path: Path, sqlite_store: Store) -> WorkTree:
    """A working tree holding a Python module, a pyproject and a lockfile."""
    root = tmp_path / "work"
    root.mkdir()
    tree = WorkTree(root, sqlite_store)
    tree.write("src/parse.py", PARSE_PY)
    tree.write("pyproject.toml", "[project]\nname = 'demo'\n")
    tree.write("requirements-dev.txt", "pytest==8.0\n")
    tree.write("README.md", "notes\n")
    return tree


@pytest.fixture
def policy_path(tmp_path: Path) -> Path:
    """Where the session's policy file lives (absent until a test writes it)."""
    return tmp_path / "admin" / "probe-policies.json"


@pytest.fixture
def write_postures(policy_path: Path) -> PostureWriter:
    """Write a schema-3 policy file with the given ``turn_postures``."""

    def write(entries: list[dict[str, object]]) -> Path:
        policy_path.parent.mkdir(exist_ok=True)
        document = {
            "schema": 3,
            "policies": [
                {
                    "id": "default",
                    "allowed_executables": ["python3"],
                    "timeout_seconds": 10,
                    "max_output_bytes": 65536,
                    "allowed_domains": [],
                    "environment": ["PATH"],
                    "memory_bytes": 1073741824,
                    "max_processes": 64,
                    "scratch_bytes": 268435456,
                }
            ],
            "turn_postures": entries,
        }
        policy_path.write_text(json.dumps(document), encoding="utf-8")
        policy_path.chmod(0o600)
        return policy_path

    return write


@pytest.fixture
def svc(sqlite_store: Store, policy_path: Path) -> ProbeService:
    """A Python-face session over the SQLite store and the test's policy file."""
    return ProbeService(sqlite_store, settings=read_settings({}), policy_file=policy_path)
