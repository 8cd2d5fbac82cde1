"""A recheck scenario any face can drive: a claim resting on a real sandboxed receipt, an
edit that reopens it, and the poll that waits for a recheck's batch to settle.

``Driver.call(op, params)`` is the one interface (tests/faces/drivers.py): the Python API,
the NDJSON host and the MCP server all answer plain JSON, so a test runs the same steps on
each.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Protocol

POLICY_ID = "recheck-python"
SCOPE = "parsing"
STATEMENT = "parse() keeps an empty field after a trailing comma"
#: The source the claim is made on, a body edit that keeps the behaviour, and one that
#: breaks it (the rerun then refutes the claim).
GOOD = "def parse(text):\n    return text.split(',')\n"
EDITED = "def parse(text):\n    parts = text.split(',')\n    return parts\n"
BROKEN = "def parse(text):\n    return [p for p in text.split(',') if p]\n"
PROBE = (
    "import sys; sys.path.insert(0, 'src'); from parse import parse; "
    "sys.exit(0 if parse('a,b,') == ['a', 'b', ''] else 1)"
)
#: Liveness bound on a batch: a hang fails the test instead of the CI run (not a timing
#: assertion: a slow machine only waits longer).
SETTLE_DEADLINE_S = 240.0


class Driver(Protocol):
    def call(self, op: str, params: dict[str, Any] | None = None) -> Any: ...


def write_policy(path: Path, policy_id: str = POLICY_ID) -> Path:
    """An owner-only policy file whose one policy ``policy_id`` allows ``python3``;
    returns its path."""
    policy = {
        "id": policy_id,
        "allowed_executables": ["python3"],
        "timeout_seconds": 30,
        "max_output_bytes": 100_000,
        "allowed_domains": [],
        "environment": ["PATH", "LANG"],
    }
    path.write_text(json.dumps({"schema": 1, "policies": [policy]}), encoding="utf-8")
    path.chmod(0o600)
    return path


def probe_plan(snapshot_id: str) -> dict[str, Any]:
    """The plan whose receipt the claim rests on: exit 0 supports, a failure refutes."""
    return {
        "snapshot_id": snapshot_id,
        "policy_id": POLICY_ID,
        "executable": "python3",
        "args": ["-c", PROBE],
        "hypothesis": STATEMENT,
        "failure_refutes": True,
        "oracle": {
            "check": {"kind": "exit_code", "equals": 0},
            "source": "user_requirement",
            "reference": "issue #1",
        },
    }


def claim_doc(snapshot_id: str, evidence: list[dict[str, Any]]) -> dict[str, Any]:
    """The claim: the file and the parse() definition it rests on, with ``evidence``."""
    return {
        "scope": SCOPE,
        "statement": STATEMENT,
        "kind": "behavior",
        "snapshot_id": snapshot_id,
        "evidence": evidence,
        "dependencies": [
            {"exact_blob": {"path": "src/parse.py"}},
            {
                "query_set": {
                    "query": {"kind": "python_symbol", "name": "parse", "domain": "src/**"}
                }
            },
        ],
    }


def ok(result: Any) -> Any:
    """``result``, failing the test when a face refused the call."""
    assert not (isinstance(result, dict) and "error" in result), result
    return result


def capture(driver: Driver, repo: Path, source: str) -> str:
    """Write ``source`` as src/parse.py under ``repo``, capture it, return the snapshot id."""
    (repo / "src").mkdir(parents=True, exist_ok=True)
    (repo / "src" / "parse.py").write_text(source, encoding="utf-8")
    return str(ok(driver.call("snapshot_capture", {"root": str(repo)}))["snapshot_id"])


def claim_on_receipt(driver: Driver, repo: Path) -> tuple[str, str, str]:
    """Capture GOOD, run the probe for real, record the claim on its receipt; return
    (snapshot, receipt, claim id)."""
    snapshot = capture(driver, repo, GOOD)
    plan_id = ok(driver.call("probe_plan", {"plan": probe_plan(snapshot)}))["plan_id"]
    run = ok(driver.call("probe_run", {"plan_id": plan_id, "policy_id": POLICY_ID}))
    assert run["outcome"] == "supports", run
    receipt = run["receipt_sha256"]
    claim = ok(driver.call("claim_create", {"claim": claim_doc(snapshot, [{"receipt": receipt}])}))
    return snapshot, receipt, claim["claim_id"]


def settled(driver: Driver, batch_id: str) -> dict[str, Any]:
    """Poll ``batch_status`` until the recheck of ``batch_id`` settled; return the status."""
    deadline = time.monotonic() + SETTLE_DEADLINE_S
    delay = 0.01
    while time.monotonic() < deadline:
        status = ok(driver.call("batch_status", {"batch_id": batch_id}))
        if status["recheck"]["settled"]:
            return dict(status)
        time.sleep(delay)
        delay = min(0.2, delay * 2)
    raise AssertionError(f"recheck {batch_id} not settled within {SETTLE_DEADLINE_S}s")
