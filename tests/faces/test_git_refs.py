"""Refs on every face: ``snapshot_capture`` with ``ref``, ``gate_change``, and refs in
``change_analyze`` / ``claim_check``; bad refs and repositories refused alike, nothing
written (docs/ARCHITECTURE.md, "Snapshots from git")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from probe_service.claims import claim_create, no_receipts
from probe_service.snapshot import snapshot_capture_ref
from probe_service.store import open_store

from ..fuzz.strategies import row_counts
from ..snapshot.gitrepos import commit_all, git, init_repo, write
from .drivers import FACES, open_face
from .test_bad_input import answers_writing_nothing, assert_refused_alike


@pytest.fixture
def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A face root holding a repository with two commits and a claim on the first, and
    a repository outside it."""
    monkeypatch.delenv("PROBE_DATABASE_URL", raising=False)
    monkeypatch.delenv("BYTE_PROBE_CAPTURE_ROOTS", raising=False)
    root = tmp_path / "root"
    root.mkdir()
    repo = init_repo(root / "repo")
    write(repo, "src/parse.py", b"def parse(t):\n    return t\n")
    write(repo, "README.md", b"readme\n")
    commit_all(repo, "base")
    outside = init_repo(tmp_path / "outside")
    write(outside, "x", b"x")
    commit_all(outside)
    store = open_store(root)
    try:
        base = snapshot_capture_ref(store, repo, "main", (str(root),)).snapshot_id
        request = {
            "scope": "payments",
            "statement": "parse returns its input",
            "kind": "behavior",
            "snapshot_id": base,
            "dependencies": [{"exact_blob": {"path": "src/parse.py"}}],
        }
        claim_id = claim_create(store, request, receipts=no_receipts).claim_id
    finally:
        store.close()
    write(repo, "src/parse.py", b"def parse(t):\n    return t.strip()\n")
    commit_all(repo, "head")
    return {
        "root": root,
        "repo": str(repo),
        "outside": outside,
        "claim": claim_id,
        "base": base,
        "blob": git(repo, "rev-parse", "main:README.md"),
    }


def test_gate_change_on_every_face(layout: dict[str, Any]) -> None:
    """Each face captures both refs, finds the changed dependency and fails the gate on
    the head, naming the claim's obligation; every face agrees on the ids."""
    params = {"repository": layout["repo"], "base": "main~1", "head": "main", "scope": "payments"}
    answers = {}
    for face in FACES:
        with open_face(face, layout["root"]) as driver:
            answers[face] = driver.call("gate_change", params)
    first = answers["python"]
    assert first["base_snapshot_id"] == layout["base"]
    assert first["change"]["changed_paths"] == ["src/parse.py"]
    assert [o["claim_id"] for o in first["change"]["opened"]] == [layout["claim"]]
    assert first["report"]["passed"] is False
    for face in FACES:
        answer = answers[face]
        assert (answer["base_snapshot_id"], answer["head_snapshot_id"]) == (
            first["base_snapshot_id"],
            first["head_snapshot_id"],
        ), face
        assert answer["report"]["passed"] is False, face
        assert [o["claim_id"] for o in answer["report"]["open_obligations"]] == [layout["claim"]], (
            face
        )


def test_refs_in_change_analyze_and_claim_check(layout: dict[str, Any]) -> None:
    """change_analyze and claim_check take refs instead of snapshot ids."""
    repo = layout["repo"]
    with open_face("host", layout["root"]) as driver:
        analysis = driver.call(
            "change_analyze", {"repository": repo, "from_ref": "main~1", "to_ref": "main"}
        )
        checked = driver.call(
            "claim_check",
            {"claim_ids": [layout["claim"]], "repository": repo, "target_ref": "main"},
        )
        mixed = driver.call(
            "change_analyze",
            {"from_snapshot": layout["base"], "to_ref": "main", "repository": repo},
        )
    assert analysis["changed_paths"] == ["src/parse.py"]
    assert analysis["from_snapshot_id"] == layout["base"]
    assert [c["state"] for c in checked["checks"]] == ["needs_recheck"]
    assert mixed["to_snapshot_id"] == analysis["to_snapshot_id"]


def _refusals(layout: dict[str, Any]) -> list[tuple[str, dict[str, Any], str, str]]:
    blob, claim, repo = layout["blob"], layout["claim"], layout["repo"]
    return [
        ("snapshot_capture", {"root": repo, "ref": "nope"}, "not_found", "'nope'"),
        ("snapshot_capture", {"root": repo, "ref": blob}, "invalid_input", blob),
        ("snapshot_capture", {"root": repo, "ref": "main:x"}, "invalid_input", "main:x"),
        (
            "gate_change",
            {"repository": repo, "base": "main", "head": "nope", "scope": "payments"},
            "not_found",
            "'nope'",
        ),
        (
            "gate_change",
            {"repository": repo, "base": "main", "head": "main", "scope": "paymnets"},
            "invalid_input",
            "paymnets",
        ),
        (
            "change_analyze",
            {"repository": repo, "from_ref": "main", "to_ref": blob},
            "invalid_input",
            blob,
        ),
        (
            "change_analyze",
            {"from_snapshot": layout["base"], "from_ref": "main", "to_ref": "main"},
            "invalid_input",
            "from_snapshot and from_ref",
        ),
        (
            "claim_check",
            {"claim_ids": [claim], "repository": repo, "target_ref": "nope"},
            "not_found",
            "'nope'",
        ),
    ]


def test_bad_refs_and_repositories_refused_alike_writing_nothing(layout: dict[str, Any]) -> None:
    """A ref that does not exist or names a blob, a repository outside the capture roots,
    a scope without claims: the same code on every face, naming the object; every table
    keeps its row count."""
    cases = _refusals(layout)
    store = open_store(layout["root"])
    try:
        answers = answers_writing_nothing(layout["root"], store, cases)
    finally:
        store.close()
    assert_refused_alike(cases, answers)


def test_machine_faces_confine_the_repository(layout: dict[str, Any]) -> None:
    """On the host and MCP a repository outside the capture roots is refused naming it,
    before git runs, writing nothing; a relative repository is taken from --root."""
    outside = str(layout["outside"])
    cases = [
        ("snapshot_capture", {"root": outside, "ref": "main"}),
        ("gate_change", {"repository": outside, "base": "main", "head": "main"}),
        ("change_analyze", {"repository": outside, "from_ref": "main", "to_ref": "main"}),
    ]
    store = open_store(layout["root"])
    try:
        for face in ("host", "mcp"):
            with open_face(face, layout["root"]) as driver:
                before = row_counts(store)
                answers = [driver.call(op, params) for op, params in cases]
                relative = driver.call("snapshot_capture", {"root": "repo", "ref": "main~1"})
                assert row_counts(store) == before, face
            for answer in answers:
                assert answer["error"]["code"] == "unsafe_path", (face, answer)
                assert "outside the capture roots" in answer["error"]["message"], answer
                assert outside in answer["error"]["message"], answer
            assert relative["snapshot_id"] == layout["base"]
            assert relative["git"]["tree_cached"] is True
    finally:
        store.close()
