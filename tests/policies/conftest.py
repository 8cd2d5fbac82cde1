"""Helpers for policy-file tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

VALID_POLICY: dict[str, Any] = {
    "id": "local-python-no-network",
    "allowed_executables": ["python3"],
    "timeout_seconds": 30,
    "max_output_bytes": 1000000,
    "allowed_domains": [],
    "environment": ["LANG", "LC_ALL", "PATH", "TMPDIR"],
}

Writer = Callable[..., Path]


@pytest.fixture
def write_policy_file(tmp_path: Path) -> Writer:
    """Write a policy document (dict or raw text) with safe 0600 permissions."""

    def _write(document: Any, name: str = "probe-policies.json", mode: int = 0o600) -> Path:
        path = tmp_path / name
        text = document if isinstance(document, str) else json.dumps(document)
        path.write_text(text)
        path.chmod(mode)
        return path

    return _write


def document(*policies: dict[str, Any], **top: Any) -> dict[str, Any]:
    """A policy file document with the given policies (default: one valid policy)."""
    return {"schema": 1, "policies": list(policies) or [dict(VALID_POLICY)], **top}
