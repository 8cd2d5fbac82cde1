"""A planted refutation never answers a later run unconfirmed (docs/ARCHITECTURE.md,
"Confirming a refutation").

The attack: something outside the program -- in the report, another run exhausting a
host-wide budget -- makes one execution of an honest probe fail, its oracle fails under
``failure_refutes``, and the receipt says ``refutes``. Before, every later identical run
was answered with that refutation from the cache without running.

Here the outside influence is honest and exact: a real probe, through the real sandbox,
asks the test host (an address the policy allows) for its answer and refutes when told
``refute``. The test scripts what successive executions are told; nothing it changes is an
input of the action, so the action key stays the same, exactly as with the attack.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from probe_service.plans import ProbeRunResult, find_reusable_receipt, verify_receipt
from probe_service.plans.tables import receipts
from probe_service.policies import POLICY_FILE_ENV
from probe_service.sandbox import SandboxRuntime
from probe_service.sandbox.runtime import find_system_tool
from probe_service.store import Store

from .. import calls as service
from .conftest import TEST_HOST, NetnsHost, _wait_until_serving

POLICY_ID = "refute-reuse"
#: A port of the test host no other server there uses.
ANSWER_PORT = 8081
PROBE = f"""
import sys, urllib.request
answer = urllib.request.urlopen("http://{TEST_HOST}:{ANSWER_PORT}/", timeout=60).read().decode()
print("told", answer)
sys.exit(0 if answer == "support" else 1)
"""


@dataclass(frozen=True)
class Answers:
    """What the next executions of the probe are told, and what they were told so far."""

    pending: Path
    served: Path

    def script(self, *answers: str) -> None:
        """The next executions are told these answers, in order."""
        self.pending.write_text("".join(f"{answer}\n" for answer in answers))

    def told(self) -> list[str]:
        """Every answer an execution was given, in order."""
        return self.served.read_text().splitlines() if self.served.exists() else []


@pytest.fixture
def answers(test_host: NetnsHost, tmp_path: Path) -> Iterator[Answers]:
    """The answer server on the test host (198.51.100.2:8081); stopped after the test."""
    ip = find_system_tool("ip")
    assert ip is not None
    scripted = Answers(tmp_path / "answers.txt", tmp_path / "served.txt")
    scripted.script()
    server_file = Path(__file__).with_name("answer_server.py")
    argv = [str(ip), "netns", "exec", test_host.namespace, "python3", str(server_file)]
    argv += [TEST_HOST, str(ANSWER_PORT), str(scripted.pending), str(scripted.served)]
    server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_until_serving(TEST_HOST, ANSWER_PORT, server)
        scripted.served.write_text("")  # the readiness connection asked nothing
        yield scripted
    finally:
        server.terminate()
        server.wait()


PolicyWriter = Callable[..., None]


@pytest.fixture
def write_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> PolicyWriter:
    """Write the administrator's policy file: python3, the test host's answer port."""
    path = tmp_path / "admin" / "probe-policies.json"
    path.parent.mkdir()

    def _write(**overrides: Any) -> None:
        policy: dict[str, Any] = {
            "id": POLICY_ID,
            "allowed_executables": ["python3"],
            "timeout_seconds": 90,
            "max_output_bytes": 100_000,
            "allowed_domains": [TEST_HOST],
            "allowed_ports": [80, 443, ANSWER_PORT],
            "environment": ["PATH"],
            **overrides,
        }
        path.write_text(json.dumps({"schema": 3, "policies": [policy]}))
        path.chmod(0o600)
        monkeypatch.setenv(POLICY_FILE_ENV, str(path))

    _write()
    return _write


RunPlan = Callable[[], ProbeRunResult]


@pytest.fixture
def run_plan(
    sqlite_store: Store,
    runtime: SandboxRuntime,
    small_snapshot: str,
    write_policy: PolicyWriter,
    run_tmp: Path,
) -> RunPlan:
    """Run the one plan (ask the test host; refuting when told so), reuse allowed."""
    plan = {
        "snapshot_id": small_snapshot,
        "policy_id": POLICY_ID,
        "executable": "python3",
        "args": ["-c", PROBE],
        "oracle": {
            "check": {"kind": "exit_code", "equals": 0},
            "source": "user_requirement",
            "reference": "refute reuse test",
        },
        "failure_refutes": True,
    }
    plan_id = service.probe_plan(sqlite_store, plan).plan_id

    def _run() -> ProbeRunResult:
        return service.probe_run(sqlite_store, plan_id, POLICY_ID, runtime=runtime)

    return _run


def _reusable_rows(store: Store) -> list[bool]:
    with store.reading() as conn:
        return [
            bool(r)
            for r in conn.execute(
                receipts.select().with_only_columns(receipts.c.reusable)
            ).scalars()
        ]


class TestPlantedRefutation:
    def test_a_refutation_planted_by_one_execution_is_not_reused(
        self, run_plan: RunPlan, answers: Answers
    ) -> None:
        """One execution refutes, the same action re-executed supports: the first run is
        inconclusive (flaky) and the next identical run executes, answered by no cache."""
        answers.script("refute", "support", "support")
        planted = run_plan()
        later = run_plan()
        assert later.reused is False
        assert (later.outcome, later.reason) == ("supports", "oracle_passed")
        assert answers.told() == ["refute", "support", "support"]
        assert (planted.outcome, planted.reason) == ("inconclusive", "flaky")

    def test_a_disagreement_is_flaky_and_never_cached(
        self, run_plan: RunPlan, answers: Answers, sqlite_store: Store
    ) -> None:
        """The receipt commits to both executions; neither the refutation nor the flaky
        result is stored as reusable or found by the action key."""
        answers.script("refute", "support")
        result = run_plan()
        committed = result.receipt.committed.to_json()
        assert (committed["outcome"], committed["reason"]) == ("inconclusive", "flaky")
        assert committed["check"]["passed"] is False  # the first execution's verdict
        confirmation = committed["confirmation"]
        assert confirmation["state"] == "disagreed"
        assert (confirmation["outcome"], confirmation["on"]) == ("supports", "same_worker")
        kept = result.receipt.operational.to_json()["confirmation"]
        assert kept["worker"] == result.receipt.operational.to_json()["worker"]
        assert verify_receipt(result.receipt) == result.receipt_sha256
        assert _reusable_rows(sqlite_store) == [False]
        assert find_reusable_receipt(sqlite_store, committed["action_key"]) is None


class TestConfirmedRefutation:
    def test_a_reproduced_refutation_is_confirmed_and_reused(
        self, run_plan: RunPlan, answers: Answers
    ) -> None:
        """Both executions refute: the receipt says confirmed (in this process, so on the
        same worker) and the next identical run is answered from it without executing."""
        answers.script("refute", "refute")
        first = run_plan()
        assert (first.outcome, first.reason) == ("refutes", "oracle_failed")
        confirmation = first.receipt.committed.to_json()["confirmation"]
        assert (confirmation["state"], confirmation["on"]) == ("confirmed", "same_worker")
        assert confirmation["outcome"] == "refutes"
        again = run_plan()
        assert again.reused is True
        assert again.receipt_sha256 == first.receipt_sha256
        assert answers.told() == ["refute", "refute"]

    def test_without_confirmation_the_first_refutation_is_reused_and_says_so(
        self, run_plan: RunPlan, answers: Answers, write_policy: PolicyWriter
    ) -> None:
        """Under confirm_refutes: false the first refutation is executed once, reused, and
        its receipt says unconfirmed."""
        write_policy(confirm_refutes=False)
        answers.script("refute", "support")
        first = run_plan()
        assert first.outcome == "refutes"
        confirmation = first.receipt.committed.to_json()["confirmation"]
        assert confirmation == {"state": "unconfirmed", "required": False}
        again = run_plan()
        assert (again.reused, again.outcome) == (True, "refutes")
        assert answers.told() == ["refute"]
