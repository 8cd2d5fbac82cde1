"""Public API hygiene: every name a package exports is importable, errors share one root."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest

from probe_service import errors

PACKAGES = [
    "probe_service.errors",
    "probe_service.store",
    "probe_service.snapshot",
    "probe_service.policies",
    "probe_service.sandbox",
    "probe_service.plans",
    "probe_service.claims",
    "probe_service.queue",
    "probe_service.service",
]


@pytest.mark.parametrize("name", PACKAGES)
def test_all_names_importable(name: str) -> None:
    """Each name in a package's __all__ exists on the package."""
    module = importlib.import_module(name)
    assert [n for n in module.__all__ if not hasattr(module, n)] == []


def test_every_error_descends_from_one_root() -> None:
    """Every exception class the errors module defines is a ProbeServiceError."""
    classes = [
        c for _, c in inspect.getmembers(errors, inspect.isclass) if c.__module__ == errors.__name__
    ]
    assert classes
    assert all(issubclass(c, errors.ProbeServiceError) for c in classes)


def test_service_lists_its_operations(tmp_path: Path) -> None:
    """capabilities (on the Python face, which offers every row) names exactly the
    operations of the table, each with a handler."""
    from probe_service import service

    with service.ProbeService.open(tmp_path, lazy=True) as svc:
        caps = svc.call("capabilities")
    table = list(service.operations())
    assert [op["name"] for op in caps["operations"]] == [op.name for op in table]
    assert all(callable(op.handler) and op.description for op in table)
    # The specification's public operations are all in the table.
    spec = {
        "snapshot_capture", "claim_create", "knowledge_record_answer", "knowledge_query",
        "claim_check", "change_analyze", "obligation_list", "obligation_resolve",
        "knowledge_events", "probe_plan", "probe_run", "probe_get", "capabilities",
    }  # fmt: skip
    assert spec <= {op["name"] for op in caps["operations"]}
