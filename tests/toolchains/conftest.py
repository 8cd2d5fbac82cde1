"""Toolchain fixtures: small trees in tmp_path, and one real pytest toolchain per session.

The session toolchain is built by our own ``create_python_toolchain`` from
``/usr/bin/python3.11`` with pytest installed by pip from the package index pip is
configured with (PyPI here): the path an administrator takes. It is built once per test
session, under a directory the probe uids can search.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from probe_service.policies import POLICY_FILE_ENV
from probe_service.toolchains.create import create_python_toolchain

from ..conftest import make_searchable

BASE_PYTHON = Path("/usr/bin/python3.11")
#: The pytest the test toolchain gets: the one this test run uses, so pip finds it.
PYTEST_REQUIREMENT = f"pytest=={pytest.__version__}"


def make_tree(root: Path) -> Path:
    """A small toolchain-shaped tree: a module, a script and a link to the base python."""
    (root / "lib").mkdir(parents=True)
    (root / "lib" / "helper.py").write_text("VALUE = 42\n")
    (root / "bin").mkdir()
    script = root / "bin" / "tool"
    script.write_text("#!/bin/sh\necho tool\n")
    script.chmod(0o755)
    (root / "bin" / "python").symlink_to(BASE_PYTHON)
    return root


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A toolchain-shaped tree under tmp_path (root-owned, searchable by the probe uids)."""
    return make_tree(tmp_path / "toolchains" / "small")


def policy_entry(**overrides: Any) -> dict[str, Any]:
    """A schema-2 policy entry; override any field."""
    entry: dict[str, Any] = {
        "id": "python-tests",
        "allowed_executables": ["python3", "sh"],
        "executable_pins": {"sh": "/usr/bin/dash"},
        "timeout_seconds": 60,
        "max_output_bytes": 1_000_000,
        "allowed_domains": [],
        "environment": ["LANG"],
    }
    entry.update(overrides)
    return entry


PolicyWriter = Callable[..., Path]


@pytest.fixture
def write_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> PolicyWriter:
    """Write a schema-2 policy file (mode 0600) and point BYTE_PROBE_POLICY_FILE at it."""
    admin = tmp_path / "admin"
    admin.mkdir(exist_ok=True)
    path = admin / "probe-policies.json"

    def _write(*entries: dict[str, Any]) -> Path:
        if path.exists():
            path.unlink()
        path.write_text(json.dumps({"schema": 2, "policies": list(entries)}))
        path.chmod(0o600)
        monkeypatch.setenv(POLICY_FILE_ENV, str(path))
        return path

    return _write


@pytest.fixture(scope="session")
def toolchain_with_pytest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real virtualenv toolchain with pytest, built once per session with pip."""
    base = tmp_path_factory.mktemp("toolchains")
    make_searchable(base)
    requirements = base / "requirements.txt"
    requirements.write_text(PYTEST_REQUIREMENT + "\n")
    dest = base / "py311-pytest"
    create_python_toolchain(BASE_PYTHON, requirements, dest, environ=os.environ)
    return dest
