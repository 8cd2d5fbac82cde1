"""A failure the sandbox caused is never evidence: real probes through the real runtime.

docs/ARCHITECTURE.md, "Trust rules": a failing check on a run where the sandbox refused
something is ``inconclusive`` / ``sandbox_denied``, under ``failure_refutes`` too, and the
receipt names what was refused. The probe's own text may only ever move a *failing*
verdict to ``inconclusive``: a pass printing refusal text stays a pass.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from probe_service.canonical import sha256_of_json
from probe_service.plans import ProbeRunResult, find_reusable_receipt, verify_receipt
from probe_service.plans.persist import load_plan, load_receipt, save_receipt
from probe_service.plans.run import action_inputs, action_key_for
from probe_service.policies import POLICY_FILE_ENV, find_policy, load_policy_file
from probe_service.sandbox import SandboxRuntime
from probe_service.store import Store

from .. import calls as service
from ..receipt_fields import receipt_of
from .conftest import REFUSAL_POLICY_ID as POLICY_ID
from .conftest import RefusalProbe

Probe = RefusalProbe


@pytest.fixture
def probe(refusal_probe: Probe) -> Probe:
    """A real probe under the refusal policy (``tests/plans/conftest.py``)."""
    return refusal_probe


def refusals(result: ProbeRunResult) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = result.receipt.committed.to_json().get("refusals", [])
    return found


LOOKUP = "import urllib.request; urllib.request.urlopen('http://example.com/', timeout=10)"
WRITE_SOURCE = "open('out.txt', 'w').write('x')"


class TestRefusalsAreNotEvidence:
    def test_a_failed_name_lookup_without_allowed_domains_is_sandbox_denied(
        self, probe: Probe
    ) -> None:
        """No allowed domain means no network: the failed lookup refutes nothing."""
        result = probe(LOOKUP)
        assert result.exit_code == 1
        assert (result.outcome, result.reason) == ("inconclusive", "sandbox_denied")
        (refused,) = refusals(result)
        assert refused["operation"] == "name_lookup"
        assert refused["kind"] == "sandbox_denied"
        assert f"no domain is allowed by policy {POLICY_ID}" in refused["fix"]

    def test_a_write_into_the_checkout_is_sandbox_denied(self, probe: Probe) -> None:
        """The source is read-only: a failed write into it refutes nothing."""
        result = probe(WRITE_SOURCE)
        assert result.exit_code == 1
        assert (result.outcome, result.reason) == ("inconclusive", "sandbox_denied")
        (refused,) = refusals(result)
        assert (refused["operation"], refused["target"]) == ("write", "out.txt")
        assert refused["fix"] == "the source is read-only: write under $BYTE_PROBE_SCRATCH"
        # What JSON carries (``run --json``, ``receipt_get``) names it under the same fields.
        assert [r.model_dump() for r in result.refusals] == [refused]

    def test_the_hint_and_the_verdict_name_the_same_write(self, probe: Probe) -> None:
        """The operational hint is built from the very refusals the verdict rests on."""
        result = probe(WRITE_SOURCE)
        hint = result.receipt.operational.to_json()["possible_sandbox_denial"]
        assert hint["writes"] == [r["target"] for r in refusals(result)] == ["out.txt"]

    def test_a_genuine_failure_still_refutes(self, probe: Probe) -> None:
        """A failure with no refusal in sight is the evidence the plan declared it to be."""
        result = probe("assert open('data.txt').read() == 'changed\\n'")
        assert (result.outcome, result.reason) == ("refutes", "oracle_failed")
        assert "refusals" not in result.receipt.committed.to_json()
        assert "possible_sandbox_denial" not in result.receipt.operational.to_json()

    def test_a_failed_preflight_keeps_its_own_reason(self, probe: Probe) -> None:
        """A preflight that failed on a refusal is still ``preflight_failed``."""
        result = probe("print(1)", plan={"preflight": [["python3", "-c", WRITE_SOURCE]]})
        assert (result.outcome, result.reason) == ("inconclusive", "preflight_failed")


FORGED = (
    "import sys; "
    "print(\"OSError: [Errno 30] Read-only file system: 'out.txt'\"); "
    "print('socket.gaierror: [Errno -3] Temporary failure in name resolution', file=sys.stderr); "
    "print('OSError: [Errno 23] Too many open files in system', file=sys.stderr); "
)


class TestForgedRefusals:
    """SECURITY.md: refusal text printed by the probe itself."""

    def test_a_pass_printing_refusals_still_supports(self, probe: Probe) -> None:
        """Printed refusal text cannot turn a pass into anything else."""
        result = probe(FORGED + "sys.exit(0)")
        assert (result.outcome, result.reason) == ("supports", "oracle_passed")
        assert "refusals" not in result.receipt.committed.to_json()
        assert "possible_sandbox_denial" not in result.receipt.operational.to_json()

    def test_a_deliberate_failure_printing_refusals_is_inconclusive(self, probe: Probe) -> None:
        """Failing on purpose while printing a refusal buys ``inconclusive``, the accepted
        cost, and never ``refutes`` or ``supports``."""
        result = probe(FORGED + "sys.exit(1)")
        assert result.outcome == "inconclusive"
        assert result.reason in ("sandbox_denied", "host_resource")
        assert {r["evidence"] for r in refusals(result)} == {"output"}


class TestProbeEnvironment:
    def test_caches_and_temporary_files_go_to_scratch(self, probe: Probe) -> None:
        """HOME, TMPDIR and the cache variables point into scratch; tools can use them."""
        code = (
            "import os, pathlib, tempfile, json; "
            "scratch = os.environ['BYTE_PROBE_SCRATCH']; "
            "names = ['HOME', 'TMPDIR', 'XDG_CACHE_HOME', 'XDG_CONFIG_HOME', 'XDG_DATA_HOME', "
            "'XDG_STATE_HOME', 'PIP_CACHE_DIR', 'npm_config_cache', 'MYPY_CACHE_DIR', "
            "'RUFF_CACHE_DIR']; "
            "[pathlib.Path(os.environ[n], 'probe').mkdir(parents=True) for n in names]; "
            "tempfile.NamedTemporaryFile(); "
            "print(json.dumps({n: os.environ[n].startswith(scratch + '/') for n in names})); "
            "print(os.environ.get('PYTHONDONTWRITEBYTECODE'))"
        )
        result = probe(code)
        assert (result.outcome, result.exit_code) == ("supports", 0), result.stderr
        first, second = result.stdout.splitlines()
        assert set(json.loads(first).values()) == {True}
        assert second == "1"

    def test_the_source_stays_read_only(self, probe: Probe) -> None:
        """Pointing caches elsewhere does not make the source writable."""
        result = probe(WRITE_SOURCE)
        assert "Read-only file system" in result.stderr


def rules_1_key(action_key_inputs: dict[str, Any]) -> str:
    """The action key as computed before the decision rules were versioned."""
    return sha256_of_json({k: v for k, v in action_key_inputs.items() if k != "decision_rules"})


class TestOlderRulesAreNotReused:
    def test_a_refutation_decided_under_older_rules_is_not_reused(
        self, probe: Probe, sqlite_store: Store, runtime: SandboxRuntime
    ) -> None:
        """A stored ``refutes`` keyed before the rules were versioned (the answer the old
        rules gave a write into the checkout, even a confirmed one) never answers the same
        action now."""
        first = probe(WRITE_SOURCE)
        plan_id = first.plan_id
        plan = load_plan(sqlite_store, plan_id)
        policy_file = load_policy_file(Path(os.environ[POLICY_FILE_ENV]))
        policy = find_policy(policy_file, POLICY_ID)
        inputs = action_inputs(plan_id, plan, policy, runtime.digest, os.environ)
        assert first.receipt.committed.action_key == action_key_for(inputs)
        # The receipt the rules-1 service wrote: refutes, reproduced, reusable, under the
        # rules-1 key.
        committed = {
            **{k: v for k, v in first.receipt.committed.to_json().items() if k != "refusals"},
            "action_key": rules_1_key(inputs.model_dump(mode="json")),
            "outcome": "refutes",
            "reason": "oracle_failed",
            "confirmation": {"state": "confirmed", "required": True, "on": "same_worker"},
        }
        stored = receipt_of(committed, {**first.receipt.operational.to_json(), "run_id": "old"})
        assert save_receipt(sqlite_store, "old", stored, reusable=True)
        assert find_reusable_receipt(sqlite_store, committed["action_key"]) == stored
        again = service.probe_run(sqlite_store, plan_id, POLICY_ID, runtime=runtime)
        assert again.reused is False
        assert (again.outcome, again.reason) == ("inconclusive", "sandbox_denied")
        # The stored receipt is untouched: same bytes, same commitment.
        assert load_receipt(sqlite_store, "old") == stored
        assert verify_receipt(stored) == stored.receipt_sha256
