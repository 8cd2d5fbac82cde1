"""Bad input on every face: the same error code, a message naming the field, and nothing
written (the store's rows compared before and after). docs/ARCHITECTURE.md, "Faces"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from probe_service.store import open_store

from ..fuzz.strategies import row_counts
from .drivers import FACES, open_face

H = "a" * 64

#: (operation, params, the field the message must name)
CASES: list[tuple[str, dict[str, Any], str]] = [
    ("probe_get", {"plan_id": "nope"}, "plan_id"),
    ("probe_get", {"plan_id": H}, "plan"),  # well-formed, not stored: not_found
    ("probe_run", {"plan_id": H, "policy_id": "p", "policy": {"id": "p"}}, "policy"),
    ("probe_run", {"plan_id": H}, "policy_id"),
    ("probe_run", {"plan_id": H, "policy_id": "p", "via": "shell"}, "via"),
    ("probe_plan", {"plan": {"snapshot_id": H, "policy_id": "p"}}, "executable"),
    ("snapshot_capture", {"root": ""}, "root"),
    ("claim_create", {"claim": {"scope": "s", "kind": "nonsense"}}, "claim"),
    ("knowledge_events", {"limit": 0}, "limit"),
    ("knowledge_query", {"scope": "s", "target_snapshot": H, "sql": "drop"}, "sql"),
    ("obligation_resolve", {"obligation_id": "obl_" + "a" * 32, "resolution": "x"}, "resolution"),
    ("gate", {"snapshot_id": H, "require_signed": ["/etc/passwd"]}, "require_signed"),
]


def test_every_face_refuses_alike_and_writes_nothing(tmp_path: Path) -> None:
    """Each bad request gets the same code on the Python API, the host and MCP, a message
    naming the field, and leaves every table of the store as it was."""
    refusals: dict[str, list[tuple[str, str]]] = {}
    for face in FACES:
        root = tmp_path / face
        root.mkdir()
        with open_face(face, root) as driver:
            driver.call("knowledge_events")  # the store exists and is migrated
            store = open_store(root)
            try:
                before = row_counts(store)
                answers = [driver.call(op, params) for op, params, _ in CASES]
                assert row_counts(store) == before, face
            finally:
                store.close()
        refusals[face] = [(a["error"]["code"], a["error"]["message"]) for a in answers]
    for (op, _, field), (code, message) in zip(CASES, refusals["python"], strict=True):
        assert field in message, (op, message)
        assert code in {"invalid_input", "invalid_plan", "invalid_claim", "not_found"}, op
    assert [code for code, _ in refusals["host"]] == [code for code, _ in refusals["python"]]
    assert [code for code, _ in refusals["mcp"]] == [code for code, _ in refusals["python"]]
    assert refusals["host"] == refusals["mcp"]
