"""A recheck on every agent face (the Python API, the NDJSON host, the MCP server), with
real sandboxed reruns: ``obligation_recheck`` returns a batch id at once and
``batch_status`` polls it until the recheck settles (docs/ARCHITECTURE.md, "Recheck").
A refused recheck has the same code on every face and writes nothing."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from probe_service.policies import POLICY_FILE_ENV
from probe_service.sandbox import SandboxRuntime
from probe_service.service.capture_roots import CAPTURE_ROOTS_ENV
from probe_service.store import open_store

from ..fuzz.strategies import row_counts
from ..rechecking import (
    EDITED,
    SCOPE,
    capture,
    claim_doc,
    claim_on_receipt,
    ok,
    settled,
    write_policy,
)
from .drivers import FACES, Driver, open_face
from .test_parity import normalize

pytestmark = pytest.mark.sandbox

_HEX = re.compile(r"[0-9a-f]{32,64}")


def scenario(face: Driver, repo: Path) -> list[tuple[str, Any]]:
    """Claim on a receipt, edit, recheck, poll until settled, gate."""
    claim_on_receipt(face, repo)
    after = capture(face, repo, EDITED)
    started = ok(face.call("obligation_recheck", {"snapshot_id": after, "scope": SCOPE}))
    assert started["batch_id"] is not None
    assert [e["status"] for e in started["entries"]] == ["queued"]
    status = settled(face, started["batch_id"])
    assert [e["status"] for e in status["recheck"]["entries"]] == ["rechecked"]
    gate = ok(face.call("gate", {"snapshot_id": after, "scope": SCOPE}))
    assert gate["passed"], gate
    return [("obligation_recheck", started), ("batch_status", status), ("gate", gate)]


def refusal(face: Driver, repo: Path, state: Path) -> dict[str, Any]:
    """Name an obligation whose claim rests on a span only: refused, nothing written."""
    before = capture(face, repo, "def parse(text):\n    return text\n")
    span = {"span": {"path": "src/parse.py", "start": 0, "end": 10}}
    ok(face.call("claim_create", {"claim": {**claim_doc(before, [span]), "scope": "spans"}}))
    after = capture(face, repo, "def parse(text):\n    return text.strip()\n")
    assert not ok(face.call("gate", {"snapshot_id": after, "scope": "spans"}))["passed"]
    (owed,) = ok(face.call("obligation_list", {"scope": "spans", "state": "open"}))["obligations"]
    store = open_store(state)
    try:
        counts = row_counts(store)
        answer = face.call(
            "obligation_recheck",
            {"snapshot_id": after, "obligation_ids": [owed["obligation_id"][:12]]},
        )
        assert row_counts(store) == counts
    finally:
        store.close()
    return dict(answer)


def test_recheck_on_every_face(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runtime: SandboxRuntime
) -> None:
    """Each face queues the rerun, polls it to a rechecked resolution and passes the gate,
    with the same results; each refuses the same bad request with the same code."""
    monkeypatch.setenv(POLICY_FILE_ENV, str(write_policy(tmp_path / "policies.json")))
    monkeypatch.setenv(CAPTURE_ROOTS_ENV, str(tmp_path))
    results: dict[str, Any] = {}
    refusals: dict[str, Any] = {}
    for face in FACES:
        state = tmp_path / face / "state"
        state.mkdir(parents=True)
        with open_face(face, state) as driver:
            steps = normalize(scenario(driver, tmp_path / face / "repo"), {})
            # Ids inside sentences (a next step naming its batch) are ids too.
            results[face] = _HEX.sub("<hex>", json.dumps(steps, sort_keys=True))
            refusals[face] = refusal(driver, tmp_path / face / "spans", state)
    assert results["host"] == results["python"]
    assert results["mcp"] == results["python"]
    for face, answer in refusals.items():
        assert answer["error"]["code"] == "not_rerunnable", (face, answer)
        assert "needs a person or an agent" in answer["error"]["message"]
