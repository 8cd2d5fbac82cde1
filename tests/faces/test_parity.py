"""Parity: one scenario gives the same results on the Python API, the NDJSON host and the
MCP server (docs/ARCHITECTURE.md, "Faces"); ids, timestamps and timings aside.

Every run is a real sandboxed probe through the pinned runtime under a policy file this
test writes; the host and the MCP server are real subprocesses (``byte-probe host``, and
``byte-probe mcp`` through the SDK's stdio client).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from probe_service.policies import POLICY_FILE_ENV
from probe_service.sandbox import SandboxRuntime
from probe_service.service.capture_roots import CAPTURE_ROOTS_ENV

from ..rechecking import write_policy
from .drivers import FACES, Driver, open_face

pytestmark = pytest.mark.sandbox

POLICY_ID = "faces-parity"
SCOPE = "parsing"
PARSE_PY = "def parse(text):\n    return text.split(',')\n"
PARSE_PY_EDITED = "def parse(text):\n    # split on commas\n    return text.split(',')\n"
PROBE = "import sys; sys.path.insert(0, 'src'); from parse import parse; print(parse('a,b,'))"


def plan(snapshot_id: str) -> dict[str, Any]:
    return {
        "snapshot_id": snapshot_id,
        "policy_id": POLICY_ID,
        "executable": "python3",
        "args": ["-c", PROBE],
        "oracle": {
            "check": {"kind": "stdout_contains", "text": "['a', 'b', '']"},
            "source": "user_requirement",
            "reference": "issue #1",
        },
    }


def scenario(face: Driver, repo: Path) -> list[tuple[str, Any]]:
    """Capture, plan, run, claim, edit, capture, analyze, check, obligations, events."""
    steps: list[tuple[str, Any]] = []

    def call(op: str, **params: Any) -> Any:
        result = face.call(op, params)
        steps.append((op, result))
        assert "error" not in result, (op, result)
        return result

    (repo / "src").mkdir(parents=True)
    (repo / "src" / "parse.py").write_text(PARSE_PY, encoding="utf-8")
    before = call("snapshot_capture", root=str(repo))["snapshot_id"]
    plan_id = call("probe_plan", plan=plan(before))["plan_id"]
    call("probe_get", plan_id=plan_id)
    run = call("probe_run", plan_id=plan_id, policy_id=POLICY_ID)
    assert run["outcome"] == "supports", run
    claim = call(
        "claim_create",
        claim={
            "scope": SCOPE,
            "statement": "parse() keeps an empty field after a trailing comma",
            "kind": "behavior",
            "snapshot_id": before,
            "dependencies": [{"exact_blob": {"path": "src/parse.py"}}],
            "evidence": [{"receipt": run["receipt_sha256"]}],
        },
    )
    (repo / "src" / "parse.py").write_text(PARSE_PY_EDITED, encoding="utf-8")
    after = call("snapshot_capture", root=str(repo))["snapshot_id"]
    call("change_analyze", from_snapshot=before, to_snapshot=after, scope=SCOPE)
    call("claim_check", claim_ids=[claim["claim_id"]], target_snapshot=after)
    (obligation,) = call("obligation_list", scope=SCOPE, state="open")["obligations"]
    rerun_plan = call("probe_plan", plan=plan(after))["plan_id"]
    rerun = call("probe_run", plan_id=rerun_plan, policy_id=POLICY_ID)
    call(
        "obligation_resolve",
        obligation_id=obligation["obligation_id"],
        resolution="rechecked",
        rationale="reran the parse probe on the edited tree",
        receipt=rerun["receipt_sha256"],
    )
    call("obligation_list", scope=SCOPE)
    call("knowledge_query", scope=SCOPE, target_snapshot=after, text="trailing comma")
    call("knowledge_events")
    return steps


_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")
_VOLATILE = re.compile(
    r"(elapsed|wall_|_at$|^at$|created|duration|timing|_ms$|_us$|_s$|worker|run_id|memory_peak)"
)


def normalize(value: Any, ids: dict[str, str], key: str = "") -> Any:
    """Ids become ``<id N>`` in order of first appearance (so equal ids stay equal);
    timestamps, timings and worker names become placeholders; the interface label is
    the face's name and is dropped."""
    if key == "phases" and isinstance(value, dict):  # per-phase timings: names, not values
        return {k: f"<{k}>" for k in sorted(value)}
    if isinstance(value, dict):
        return {
            k: normalize(v, ids, k) for k, v in sorted(value.items()) if k not in ("interface",)
        }
    if isinstance(value, list | tuple):
        return [normalize(v, ids, key) for v in value]
    if isinstance(value, str) and _TIME.match(value):
        return "<time>"
    if _VOLATILE.search(key) and isinstance(value, int | float | str):
        return f"<{key}>"
    if isinstance(value, str) and re.fullmatch(r"([a-z]{3}_)?[0-9a-f]{32,64}", value):
        return ids.setdefault(value, f"<id {len(ids)}>")
    return value


def test_one_scenario_same_results_on_every_face(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runtime: SandboxRuntime
) -> None:
    """The Python API, the NDJSON host and the MCP server give the same results."""
    # ``runtime`` fails the test with the reason when the pinned runtime is missing; the
    # faces locate the same runtime themselves.
    monkeypatch.setenv(POLICY_FILE_ENV, str(write_policy(tmp_path / "policies.json", POLICY_ID)))
    # Each face's repository sits beside its state directory, not under its --root.
    monkeypatch.setenv(CAPTURE_ROOTS_ENV, str(tmp_path))
    results: dict[str, list[tuple[str, Any]]] = {}
    for face in FACES:
        (tmp_path / face / "state").mkdir(parents=True)
        with open_face(face, tmp_path / face / "state") as driver:
            results[face] = scenario(driver, tmp_path / face / "repo")
    normalized = {face: normalize(steps, {}) for face, steps in results.items()}
    assert normalized["host"] == normalized["python"]
    assert normalized["mcp"] == normalized["python"]
    # Content-addressed ids agree exactly across faces: same tree, same snapshot and plan.
    snapshots = {face: steps[0][1]["snapshot_id"] for face, steps in results.items()}
    plans = {face: steps[1][1]["plan_id"] for face, steps in results.items()}
    assert len(set(snapshots.values())) == 1
    assert len(set(plans.values())) == 1
