"""The benchmark's sandbox stand-in can never be selected by a policy, worker or face.

It lives in ``benchmarks/`` (not installed, not importable as part of the package), and
nothing in the package names it: so no policy key, worker option, CLI, host or MCP
operation can reach it.
"""

from __future__ import annotations

import re
from pathlib import Path

import probe_service

PACKAGE = Path(probe_service.__file__).resolve().parent
#: An import of the benchmarks or the stand-in, or a use of its names, in any spelling.
REFERENCE = re.compile(
    r"(\b(from|import)\s+(benchmarks|standin)\b)|\bstandin\b|canned_result|patched_sandbox"
    r"|import_module\(\s*[\"'](benchmarks|standin)"
)


def test_the_package_never_refers_to_the_benchmarks_or_the_standin() -> None:
    """No module of the package imports or names the benchmarks or the stand-in."""
    offenders = [
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if REFERENCE.search(path.read_text())
    ]
    assert offenders == []


def test_the_standin_is_not_importable_from_the_package() -> None:
    """The stand-in is not a module of the installed package."""
    assert not list(PACKAGE.rglob("standin*"))
    assert (PACKAGE.parent / "benchmarks" / "standin.py").is_file()


def test_a_policy_cannot_name_a_sandbox_backend() -> None:
    """The policy model has no field that chooses how a probe is run."""
    from probe_service.policies.model import Policy

    fields = set(Policy.model_fields)
    assert not {"sandbox", "backend", "runner", "launcher"} & fields


def test_a_policy_asking_for_the_standin_is_refused() -> None:
    """A policy that tries to select the stand-in fails validation (unknown keys are refused)."""
    import pytest
    from pydantic import ValidationError

    from probe_service.policies.model import Policy

    with pytest.raises(ValidationError, match="sandbox"):
        Policy.model_validate(
            {
                "id": "p",
                "allowed_executables": ["true"],
                "timeout_seconds": 5,
                "max_output_bytes": 100,
                "allowed_domains": [],
                "environment": [],
                "sandbox": "standin",
            }
        )
