"""Helpers for plan tests: a valid plan document to vary one field at a time."""

from __future__ import annotations

import copy
from typing import Any

SNAPSHOT_ID = "a" * 64

TRUSTED_SOURCES = (
    "published_specification",
    "user_requirement",
    "historical_regression",
    "differential_reference",
)
ALL_SOURCES = (*TRUSTED_SOURCES, "model_inferred")


def oracle_doc(
    check: dict[str, Any] | None = None,
    source: str = "user_requirement",
    reference: str | None = "issue #1",
) -> dict[str, Any]:
    """An oracle document; ``reference=None`` leaves the key out."""
    doc: dict[str, Any] = {
        "check": check if check is not None else {"kind": "exit_code", "equals": 0},
        "source": source,
    }
    if reference is not None:
        doc["reference"] = reference
    return doc


def plan_doc(**overrides: Any) -> dict[str, Any]:
    """A valid plan document with ``overrides`` applied (deep-copied, safe to mutate)."""
    doc: dict[str, Any] = {
        "snapshot_id": SNAPSHOT_ID,
        "policy_id": "test-policy",
        "executable": "python3",
        "args": ["-c", "print(1)"],
        "oracle": oracle_doc(),
    }
    doc.update(overrides)
    return copy.deepcopy(doc)
