"""The agent's loop over MCP through the SDK's own stdio client, on the real sandbox: read
the instructions, describe the policy, plan against it, submit, poll run_status to the
receipt, claim it; then the same plan from a shell with another LANG and PATH is answered
by that same receipt (docs/ARCHITECTURE.md, "Faces", "Asynchronous runs", "Probe
environment")."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from probe_service.plans import verify_receipt

from .drivers import McpDriver, cli_argv, open_mcp

pytestmark = pytest.mark.sandbox

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agent_session.py"
#: Liveness bound on polling one run (not a timing assertion).
POLL_BOUND_S = 240


def _policy_file(directory: Path) -> Path:
    """The README session's schema-3 policy (fixed LANG and PATH, GREETING for plans): runs
    do not depend on who asked."""
    spec = importlib.util.spec_from_file_location("agent_session", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    path = directory / "probe-policies.json"
    path.write_text(json.dumps(example.POLICY))
    path.chmod(0o600)
    return path


def _ok(answer: Any) -> dict[str, Any]:
    assert isinstance(answer, dict), answer
    assert "error" not in answer, answer
    return answer


def _poll(client: McpDriver, run_id: str) -> dict[str, Any]:
    """run_status (by an 8-hex prefix) until the run is done, within the bound."""
    deadline = time.monotonic() + POLL_BOUND_S
    while time.monotonic() < deadline:
        status = _ok(client.call("run_status", {"run_id": run_id[:8]}))
        if status["state"] == "done":
            return status
        time.sleep(0.2)
    raise AssertionError(f"run {run_id} not done within {POLL_BOUND_S}s")


@pytest.fixture
def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A face root holding a working tree, and the administrator's policy file outside it."""
    root = tmp_path / "root"
    (root / "repo").mkdir(parents=True)
    (root / "repo" / "greet.sh").write_text('printf "%s, %s\\n" "$GREETING" "$LANG"\n')
    admin = tmp_path / "admin"
    admin.mkdir()
    policy = _policy_file(admin)
    monkeypatch.setenv("BYTE_PROBE_POLICY_FILE", str(policy))
    monkeypatch.delenv("PROBE_REDIS_URL", raising=False)
    monkeypatch.delenv("PROBE_DATABASE_URL", raising=False)
    # The server's own environment, which a fixed-value policy must not let through.
    monkeypatch.setenv("LANG", "de_DE.UTF-8")
    return {"root": root, "policy": policy}


def test_the_loop_through_the_sdk_client(layout: dict[str, Path]) -> None:
    """Instructions name the loop; policy_describe tells the plan what it may use; submit
    answers at once; run_status ends with the verifiable receipt; a claim rests on it."""
    with open_mcp(layout["root"]) as client:
        for step in (
            "byte_snapshot_capture",
            "byte_policy_describe",
            "byte_probe_plan",
            "byte_probe_submit",
            "byte_run_status",
            "byte_claim_create",
            "byte_gate",
        ):
            assert step in client.instructions  # fmt: skip
        caps = _ok(client.call("capabilities"))
        assert len(json.dumps(caps)) <= 16 * 1024
        (listed,) = _ok(client.call("policy_list"))["policies"]
        described = _ok(client.call("policy_describe", {"policy_id": listed["id"]}))
        assert described["environment"]["plan_may_set"] == ["GREETING"]
        refused = client.call(
            "probe_plan", {"plan": {**_plan("0" * 64, described), "executable": "bash"}}
        )
        assert refused["error"]["code"] == "invalid_plan"
        assert "executable: 'bash' is not allowed" in refused["error"]["message"]
        captured = _ok(client.call("snapshot_capture", {"root": "repo"}))  # from --root
        plan = _plan(captured["snapshot_id"], described)
        planned = _ok(client.call("probe_plan", {"plan": plan}))
        assert planned["policy_checked"] is True
        submitted = _ok(
            client.call("probe_submit", {"plan_ids": [planned["plan_id"][:8]],
                                         "policy_id": described["id"]})
        )  # fmt: skip
        (run_id,) = submitted["run_ids"]
        status = _poll(client, run_id)
        result = status["result"]
        assert (status["outcome"], result["stdout"]) == ("supports", "hello, C.UTF-8\n")
        assert result["reuse"]["why"] == "first_run"
        receipt = result["receipt"]
        assert verify_receipt(receipt) == status["receipt_sha256"]
        claim = _ok(
            client.call(
                "claim_create",
                {"claim": {"scope": "agent", "statement": "greet.sh greets", "kind": "behavior",
                           "snapshot_id": captured["snapshot_id"],
                           "evidence": [{"receipt": status["receipt_sha256"]}],
                           "dependencies": [{"exact_blob": {"path": "greet.sh"}}]}},
            )
        )  # fmt: skip
        assert claim["outcome"] == "supported"
        gate = _ok(client.call("gate", {"snapshot_id": captured["snapshot_id"][:8],
                                        "scope": "agent"}))  # fmt: skip
        assert gate["passed"] is True
    # The same plan from a shell whose LANG and PATH differ: the same action, reused.
    env = {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "LANG": "en_GB.UTF-8",
        "HOME": os.environ.get("HOME", "/root"),
        "BYTE_PROBE_POLICY_FILE": str(layout["policy"]),
    }
    done = subprocess.run(
        cli_argv("run", planned["plan_id"][:12], "--policy", "agent-sh", "--json",
                 "--root", str(layout["root"])),
        capture_output=True, text=True, env=env, check=False, timeout=POLL_BOUND_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    shell = json.loads(done.stdout)
    assert shell["reused"] is True
    assert shell["receipt_sha256"] == status["receipt_sha256"]
    assert shell["reuse"]["why"] == "reused"


def _plan(snapshot_id: str, described: dict[str, Any]) -> dict[str, Any]:
    """A plan using what the policy description says the plan may use."""
    (name,) = described["environment"]["plan_may_set"]
    return {
        "snapshot_id": snapshot_id,
        "policy_id": described["id"],
        "executable": described["allowed_executables"][0],
        "args": ["greet.sh"],
        "environment": {name: "hello"},
        "oracle": {
            "check": {"kind": "stdout_equals", "text": "hello, C.UTF-8\n"},
            "source": "user_requirement",
            "reference": "greet.sh prints the greeting and the locale",
        },
    }


@pytest.mark.slow
def test_the_readme_session_runs(layout: dict[str, Path]) -> None:
    """examples/agent_session.py, whose output the README shows, runs the same loop."""
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--root", str(layout["root"])],
        capture_output=True, text=True, check=False, timeout=POLL_BOUND_S * 2,
        env={**os.environ, "BYTE_PROBE": " ".join(cli_argv())},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert '"state": "done"' in done.stdout
    assert '"outcome": "supports"' in done.stdout
