"""Bad input on every face: the same error code, a message naming the field, and nothing
written (the store's rows compared before and after). docs/ARCHITECTURE.md, "Faces"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from probe_service.claims import claim_create, no_receipts
from probe_service.plans.tables import plans
from probe_service.snapshot import snapshot_capture
from probe_service.store import DATABASE_URL_ENV, Store, open_store
from probe_service.store.schema import snapshots

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


UNKNOWN = "f" * 64
#: Two stored snapshots and two plans whose ids share these prefixes (rows written as-is:
#: an ambiguous prefix is refused before anything would read them).
TWIN_SNAPSHOTS = ("5eed5eed" + "0" * 56, "5eed5eed" + "1" * 56)
TWIN_PLANS = ("abcdef01" + "0" * 56, "abcdef01" + "1" * 56)


def _seed(store: Store, tree: Path) -> tuple[str, str]:
    """A snapshot with one live claim in scope ``payments``, and the twin rows; returns
    (snapshot id, claim id)."""
    (tree / "src").mkdir(parents=True)
    (tree / "src" / "parse.py").write_text("def parse(t):\n    return t\n")
    snapshot_id = snapshot_capture(store, tree).snapshot_id
    request = {
        "scope": "payments",
        "statement": "parse returns its input",
        "kind": "behavior",
        "snapshot_id": snapshot_id,
        "dependencies": [{"exact_blob": {"path": "src/parse.py"}}],
    }
    claim_id = claim_create(store, request, receipts=no_receipts).claim_id
    now = "2026-01-01T00:00:00Z"
    with store.transaction() as conn:
        conn.execute(
            snapshots.insert(),
            [{"snapshot_id": s, "manifest": b"", "files": 0, "bytes": 0, "created_at": now}
             for s in TWIN_SNAPSHOTS],
        )  # fmt: skip
        conn.execute(
            plans.insert(), [{"plan_id": p, "body": "{}", "created_at": now} for p in TWIN_PLANS]
        )
    return snapshot_id, claim_id


def _id_refusals(snapshot_id: str, claim_id: str) -> list[tuple[str, dict[str, Any], str, str]]:
    """(operation, params, code, what the message must name) for ids and scopes no face
    may accept."""
    return [
        ("gate", {"snapshot_id": UNKNOWN}, "not_found", "snapshot_id"),
        ("gate", {"snapshot_id": "ffffffff"}, "not_found", "snapshot_id"),
        ("gate", {"snapshot_id": "5eed5eed"}, "ambiguous_id", TWIN_SNAPSHOTS[1]),
        ("gate", {"snapshot_id": snapshot_id, "scope": "paymnets"}, "invalid_input", "payments"),
        ("gate_preview", {"snapshot_id": UNKNOWN}, "not_found", "snapshot_id"),
        ("gate_preview", {"snapshot_id": snapshot_id, "scope": "x"}, "invalid_input", "'x'"),
        (
            "change_analyze",
            {"from_snapshot": snapshot_id, "to_snapshot": snapshot_id, "scope": "paymnets"},
            "invalid_input",
            "paymnets",
        ),
        (
            "change_analyze",
            {"from_snapshot": snapshot_id, "to_snapshot": "ffffffff0"},
            "not_found",
            "to_snapshot",
        ),
        (
            "claim_check",
            {"claim_ids": [claim_id], "target_snapshot": UNKNOWN},
            "not_found",
            "target_snapshot",
        ),
        (
            "claim_check",
            {"claim_ids": ["clm_ffffffff"], "target_snapshot": snapshot_id},
            "not_found",
            "claim_ids[0]",
        ),
        ("claim_show", {"claim_id": "clm_ffffffff"}, "not_found", "claim_id"),
        ("probe_get", {"plan_id": "abcdef01"}, "ambiguous_id", TWIN_PLANS[0]),
        ("receipt_get", {"receipt_id": "ffffffff"}, "not_found", "receipt_id"),
        (
            "obligation_resolve",
            {"obligation_id": "obl_ffffffff", "resolution": "accepted_risk", "rationale": "r"},
            "not_found",
            "obligation_id",
        ),
        (
            "knowledge_brief",
            {"snapshot_id": "5eed5eed", "scope": "payments", "text": "parse"},
            "ambiguous_id",
            "snapshot_id",
        ),
    ]


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str | None:
    """Each backend in turn, named the way every face finds it (PROBE_DATABASE_URL)."""
    if request.param == "sqlite":
        monkeypatch.delenv(DATABASE_URL_ENV, raising=False)
        return None
    url: str = request.getfixturevalue("pg_url")
    monkeypatch.setenv(DATABASE_URL_ENV, url)
    return url


def test_unknown_ambiguous_ids_and_empty_scopes_are_refused_alike(
    tmp_path: Path, database_url: str | None
) -> None:
    """Unknown ids, prefixes matching none or several, and scopes without a live claim get
    the same code and message on the Python API, the host and MCP, on SQLite and
    PostgreSQL; the message names the field (and the candidates or scopes); every table
    keeps its row count."""
    root = tmp_path / "root"
    root.mkdir()
    store = open_store(root, database_url)
    try:
        snapshot_id, claim_id = _seed(store, tmp_path / "tree")
        cases = _id_refusals(snapshot_id, claim_id)
        answers = answers_writing_nothing(root, store, cases)
    finally:
        store.close()
    assert_refused_alike(cases, answers)


def answers_writing_nothing(
    root: Path, store: Store, cases: list[tuple[str, dict[str, Any], str, str]]
) -> dict[str, list[Any]]:
    """Every face's answers to ``cases`` (operation, params, code, named); each face must
    leave every table of ``store`` at its row count."""
    answers: dict[str, list[Any]] = {}
    for face in FACES:
        with open_face(face, root) as driver:
            before = row_counts(store)
            answers[face] = [driver.call(op, params) for op, params, _, _ in cases]
            assert row_counts(store) == before, face
    return answers


def assert_refused_alike(
    cases: list[tuple[str, dict[str, Any], str, str]], answers: dict[str, list[Any]]
) -> None:
    """Each case refused with its code naming what it must, the same on every face."""
    for (op, _, code, named), answer in zip(cases, answers["python"], strict=True):
        assert answer["error"]["code"] == code, (op, answer)
        assert named in answer["error"]["message"], (op, answer)
    assert answers["host"] == answers["python"]
    assert answers["mcp"] == answers["python"]


def test_a_prefix_works_wherever_the_full_id_does(tmp_path: Path) -> None:
    """On every face a unique prefix (here 12 hex, and clm_ + 8) is answered as the full id."""
    root = tmp_path / "root"
    root.mkdir()
    store = open_store(root)
    try:
        snapshot_id, claim_id = _seed(store, tmp_path / "tree")
    finally:
        store.close()
    for face in FACES:
        with open_face(face, root) as driver:
            shown = driver.call("claim_show", {"claim_id": claim_id[:12]})
            gated = driver.call("gate", {"snapshot_id": snapshot_id[:12], "scope": "payments"})
            got = driver.call("snapshot_get", {"snapshot_id": snapshot_id[:8]})
        assert shown["claim_id"] == claim_id, face
        assert (gated["snapshot_id"], gated["passed"]) == (snapshot_id, True), face
        assert got["snapshot_id"] == snapshot_id, face
