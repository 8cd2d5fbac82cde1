"""Schemas written for a model: every request field of every agent operation is described,
and ``capabilities`` is compact unless asked for detail (docs/ARCHITECTURE.md, "The
operation table")."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from probe_service.errors import InvalidInput
from probe_service.service import ProbeService, operations
from probe_service.service.registry import Face

#: The largest compact capabilities answer a face may give (issue: "≤ 16 KB").
COMPACT_LIMIT = 16 * 1024


def _properties(schema: Any, where: str) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """Every (object, field, field schema) in ``schema``, nested definitions included."""
    if isinstance(schema, dict):
        for name, field in (schema.get("properties") or {}).items():
            yield where, name, field
        for key, value in schema.items():
            yield from _properties(value, where if key != "$defs" else f"{where}.$defs")
    elif isinstance(schema, list):
        for item in schema:
            yield from _properties(item, where)


class TestDescriptions:
    def test_every_agent_request_field_has_a_description(self) -> None:
        """Walking every agent operation's request schema (the MCP tools' input schemas),
        nested plans, oracles, checks, claims and queries included, no field lacks a
        description."""
        missing: list[str] = []
        walked = 0
        for op in operations("mcp"):
            for where, name, field in _properties(op.request.model_json_schema(), op.name):
                walked += 1
                if not str(field.get("description", "")).strip():
                    missing.append(f"{where}.{name}")
        assert walked > 150  # the plan, claim and answer models are walked, not only the tops
        assert missing == []

    def test_the_walk_finds_a_field_without_one(self) -> None:
        """The walk itself fails on an undescribed field, however deep."""
        schema = {
            "properties": {"a": {"description": "x", "$ref": "#/$defs/B"}},
            "$defs": {"B": {"properties": {"hidden": {"type": "string"}}}},
        }
        found = [(w, n) for w, n, f in _properties(schema, "op") if "description" not in f]
        assert found == [("op.$defs", "hidden")]

    def test_the_plan_says_what_a_model_gets_wrong(self) -> None:
        """The plan's fields the issue named say what they do: failure_refutes, the oracle
        source and the reference it needs, and the environment a plan may set."""
        plan = next(op for op in operations("mcp") if op.name == "probe_plan")
        defs = plan.request.model_json_schema()["$defs"]
        assert "refutes" in defs["Plan"]["properties"]["failure_refutes"]["description"]
        source = defs["Oracle"]["properties"]["source"]["description"]
        assert "model_inferred" in source
        assert "reference" in source
        assert "required" in defs["Oracle"]["properties"]["reference"]["description"]
        environment = defs["Plan"]["properties"]["environment"]
        assert "plan_environment" in environment["description"]
        assert environment["examples"] == [{"PYTHONPATH": "src"}]


FACES: tuple[Face, ...] = ("python", "cli", "host", "mcp")


@pytest.fixture
def lazy(tmp_path: Path) -> Iterator[Any]:
    """Open a lazy session on a face (no store is created for capabilities)."""
    opened: list[ProbeService] = []

    def open_on(face: Face) -> ProbeService:
        svc = ProbeService.open(tmp_path, interface=face, lazy=True)
        opened.append(svc)
        return svc

    yield open_on
    for svc in opened:
        svc.close()


class TestCapabilities:
    @pytest.mark.parametrize("face", FACES)
    def test_compact_by_default(self, lazy: Any, face: Face) -> None:
        """The default answer fits in 16 KB on every face, each operation with a one-line
        summary and no schema; the detailed one carries every schema."""
        svc = lazy(face)
        compact = svc.call("capabilities")
        size = len(json.dumps(compact).encode("utf-8"))
        assert size <= COMPACT_LIMIT, size
        names = [op.name for op in operations(face)]
        assert [o["name"] for o in compact["operations"]] == names
        for info in compact["operations"]:
            assert info["summary"]
            assert "\n" not in info["summary"]
            assert "request_schema" not in info
            assert "description" not in info
        detailed = svc.call("capabilities", {"detail": True})
        assert len(json.dumps(detailed)) > 4 * size  # the schemas are what the default omits
        assert all(o["request_schema"]["type"] == "object" for o in detailed["operations"])
        assert compact["schema_versions"]["policy_file"] == 3

    def test_named_operations_get_their_schemas(self, lazy: Any) -> None:
        """``operations: [...]`` gives full schemas for exactly those operations."""
        answer = lazy("mcp").call("capabilities", {"operations": ["probe_plan", "run_status"]})
        full = {o["name"] for o in answer["operations"] if o.get("request_schema") is not None}
        assert full == {"probe_plan", "run_status"}
        plan = next(o for o in answer["operations"] if o["name"] == "probe_plan")
        assert "Plan" in plan["request_schema"]["$defs"]

    def test_an_operation_the_face_lacks_is_refused(self, lazy: Any) -> None:
        """Asking MCP for an admin operation's schema is refused naming the field."""
        with pytest.raises(InvalidInput, match="operations: policy_check"):
            lazy("mcp").call("capabilities", {"operations": ["policy_check"]})
