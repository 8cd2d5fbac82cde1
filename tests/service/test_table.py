"""The operation table: what every face drives (docs/ARCHITECTURE.md, "The operation table")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from probe_service.errors import InvalidInput, NotFound
from probe_service.service import ADMIN, ProbeService, Request, operations
from probe_service.service.registry import operation
from probe_service.service.rows import INDEX
from probe_service.store import Store

# Field names that would let a caller hand the service a policy or make it read a file.
_POLICY_WORDS = ("policy", "policies")
_PATH_WORDS = ("file", "path", "dest", "dir")
#: Agent rows that name a file, each confined on the machine faces to the capture roots as
#: ``snapshot_capture``'s root is (docs/ARCHITECTURE.md, "Bundles"; tests/bundles/test_faces.py
#: tries to leave them).
_CONFINED_TO_CAPTURE_ROOTS = {"bundle_verify": ["path"]}


def _properties(schema: Any, defs: dict[str, Any], seen: set[str]) -> list[str]:
    """Every property name reachable from ``schema`` (following $ref once each)."""
    found: list[str] = []
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str):
            name = ref.rsplit("/", 1)[-1]
            if name not in seen:
                seen.add(name)
                found += _properties(defs.get(name, {}), defs, seen)
        for key, value in schema.items():
            if key == "properties" and isinstance(value, dict):
                found += list(value)
            if key != "$defs":
                found += _properties(value, defs, seen)
    elif isinstance(schema, list):
        for item in schema:
            found += _properties(item, defs, seen)
    return found


@pytest.mark.parametrize("op", list(operations()), ids=lambda op: op.name)
def test_no_operation_accepts_a_policy(op: Any) -> None:
    """The policy is never an argument: only an id (``policy_id``) may name one; only
    administrator operations, which no machine face offers, take a file path."""
    schema = op.request.model_json_schema()
    names = _properties(schema, schema.get("$defs", {}), set())
    policy_like = [n for n in names if any(w in n for w in _POLICY_WORDS) and n != "policy_id"]
    if op.name == "policy_check":
        assert op.faces == ADMIN
        policy_like = []
    assert policy_like == []
    # Top level only: a plan's intervention paths are paths inside its snapshot. The
    # working tree ``snapshot_capture`` reads is the operation itself (the spec's table).
    top = list(schema.get("properties", {}))
    path_like = [n for n in top if n in _PATH_WORDS or n.endswith(("_file", "_path", "_dir"))]
    if path_like and path_like != _CONFINED_TO_CAPTURE_ROOTS.get(op.name):
        assert op.faces == ADMIN, f"{op.name} takes {path_like} but is offered to {op.faces}"


def test_admin_operations_stay_off_machine_faces() -> None:
    """No administrator operation is offered on the host or MCP."""
    host = {op.name for op in operations("host")}
    mcp = {op.name for op in operations("mcp")}
    admin = {op.name for op in operations() if op.faces == ADMIN}
    assert admin >= {"policy_check", "snapshot_materialize"}
    assert admin & (host | mcp) == set()
    assert mcp <= host


def test_methods_and_json_calls_agree(tmp_path: Path) -> None:
    """``svc.op(**params)`` and ``svc.call(op, params)`` run the same row."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.py").write_text("x = 1\n", encoding="utf-8")
    with ProbeService.open(tmp_path) as svc:
        captured = svc.snapshot_capture(root=str(repo))
        as_json = svc.call("snapshot_get", {"snapshot_id": captured.snapshot_id})
        assert as_json == svc.snapshot_get(snapshot_id=captured.snapshot_id).model_dump(mode="json")
        caps = svc.call("capabilities", {"detail": True})
        assert [o["name"] for o in caps["operations"]] == [o.name for o in operations("python")]
        assert all(o["request_schema"]["type"] == "object" for o in caps["operations"])


@pytest.mark.parametrize(
    ("name", "params", "field"),
    [
        ("probe_get", {"plan_id": "nope"}, "plan_id"),
        ("probe_run", {"plan_id": "a" * 64, "policy_id": "p", "policy": {}}, "policy"),
        ("probe_run", {"plan_id": "a" * 64}, "policy_id"),
        ("gate", {"snapshot_id": "a" * 64, "require_signed": ["/etc/passwd"]}, "require_signed"),
        ("knowledge_events", {"limit": 0}, "limit"),
        (
            "obligation_resolve",
            {"obligation_id": "obl_" + "a" * 32, "resolution": "x"},
            "resolution",
        ),
        ("claim_show", {"claim_id": "a" * 64}, "claim_id"),
    ],
)
def test_bad_requests_name_the_field_and_write_nothing(
    tmp_path: Path, name: str, params: dict[str, Any], field: str
) -> None:
    with ProbeService.open(tmp_path) as svc:
        before = svc.call("knowledge_events", {})
        with pytest.raises(InvalidInput, match=field) as caught:
            svc.call(name, params)
        assert caught.value.code == "invalid_input"
        assert svc.call("knowledge_events", {}) == before


def test_unknown_ids_are_not_found(tmp_path: Path) -> None:
    with ProbeService.open(tmp_path) as svc, pytest.raises(NotFound):
        svc.call("probe_get", {"plan_id": "b" * 64})


def test_machine_faces_cannot_call_admin_operations(tmp_path: Path) -> None:
    with ProbeService.open(tmp_path, interface="host") as svc:
        with pytest.raises(InvalidInput, match="unknown operation 'policy_check'"):
            svc.call("policy_check", {"file": "/etc/passwd"})
        # Every method exists on every session (the typed face); the face refuses the call.
        with pytest.raises(InvalidInput, match="unknown operation 'snapshot_materialize'"):
            svc.snapshot_materialize(snapshot_id="a" * 64, dest=str(tmp_path / "out"))
        assert not (tmp_path / "out").exists()


def test_a_request_field_called_name_reaches_the_operation(tmp_path: Path) -> None:
    """`svc.toolchain_digest(path=…)`-style methods pass every field, even one called
    `name` (toolchain_create), to the request rather than clashing with the method's own."""
    with ProbeService.open(tmp_path) as svc, pytest.raises(InvalidInput, match="name"):
        svc.toolchain_create(name="Bad Name", python="/x", requirements_file="/r", dest="/d")


def test_a_nul_byte_on_postgresql_is_invalid_input_not_internal(
    pg_store: Store, repo: Path
) -> None:
    """PostgreSQL text cannot hold NUL: a caller's NUL is refused as bad input (the same
    code on every face), not a bug."""
    (repo / "a.txt").write_text("a\n")
    svc = ProbeService(pg_store, interface="host")
    snapshot_id = svc.call("snapshot_capture", {"root": str(repo)})["snapshot_id"]
    with pytest.raises(InvalidInput, match="NUL"):
        svc.call("knowledge_query", {"scope": "a\0b", "text": "x", "target_snapshot": snapshot_id})


class TestTheIndex:
    """``rows.INDEX`` is what lets one call import one row module (docs/ARCHITECTURE.md,
    "Start-up"); it must name every row, under the module that defines it."""

    def test_it_lists_every_row_in_the_tables_order(self) -> None:
        ops = list(operations())
        assert [op.name for op in ops] == list(INDEX)
        for op in ops:
            assert op.handler.__module__ == f"probe_service.service.rows.{INDEX[op.name]}"

    def test_a_row_missing_from_it_is_refused(self) -> None:
        def handler(svc: ProbeService, req: Request) -> None:
            """Not listed."""

        with pytest.raises(TypeError, match=r"not_listed: define it in a service/rows/ module"):
            operation("not_listed")(handler)
        with pytest.raises(TypeError, match=r"probe_get: .*\(this one is 'test_table'\)"):
            operation("probe_get")(handler)  # listed, but under another module

    def test_a_lookup_imports_only_the_rows_module(self) -> None:
        code = (
            "import sys\n"
            "from probe_service.service import ProbeService\n"
            "svc = ProbeService.open('.', lazy=True)\n"
            "svc.operation('knowledge_events')\n"
            "print(' '.join(m for m in sys.modules if m.startswith('probe_service.service.rows.')))"
        )
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert sorted(done.stdout.split()) == [
            "probe_service.service.rows.common",
            "probe_service.service.rows.events",
        ]

    def test_an_unknown_name_is_invalid_input_on_every_face(self, tmp_path: Path) -> None:
        with ProbeService.open(tmp_path, lazy=True, interface="host") as svc:
            for name in ("no_such_op", "id_resolve"):  # id_resolve is not a host row
                with pytest.raises(InvalidInput, match=f"unknown operation '{name}'"):
                    svc.operation(name)
