"""`byte-probe plan|run|receipt|demo`, in process: one run and the demo through the real
sandbox, the command's exit codes, JSON, receipts and reuse over the stub sandbox."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from probe_service.service import ProbeService

from ..stubsandbox import Canned, StubSandbox
from .conftest import POLICY_ID, CliRunner, PlanCreator, PlanWriter, exit_oracle


class TestPlanCommands:
    def test_create_prints_plan_id(self, cli: CliRunner, plan_file: PlanWriter) -> None:
        """`plan create --json` prints the 64-hex plan id and created=true."""
        code, out, _ = cli("plan", "create", str(plan_file("print(1)", exit_oracle())), "--json")
        doc = json.loads(out)
        assert code == 0
        assert len(doc["plan_id"]) == 64
        assert doc["created"] is True

    def test_create_twice_same_id(self, cli: CliRunner, plan_file: PlanWriter) -> None:
        """Creating the same plan again prints the same id with created=false."""
        path = str(plan_file("print(1)", exit_oracle()))
        _, first, _ = cli("plan", "create", path, "--json")
        _, second, _ = cli("plan", "create", path, "--json")
        plan_id = json.loads(first)["plan_id"]
        assert json.loads(second) == {"plan_id": plan_id, "created": False, "policy_checked": True}

    def test_create_invalid_plan_names_field(self, cli: CliRunner, plan_file: PlanWriter) -> None:
        """An invalid plan exits 3 with one stderr line naming the field."""
        path = plan_file("print(1)", exit_oracle(), fixtures=[{"path": "/abs", "content": ""}])
        code, _, err = cli("plan", "create", str(path))
        assert code == 3
        assert "fixtures.0.path" in err
        assert err.count("\n") == 1

    def test_show(self, cli: CliRunner, created: PlanCreator) -> None:
        """`plan show --json` prints the stored plan under its id."""
        plan_id = created("print(1)")
        code, out, _ = cli("plan", "show", plan_id, "--json")
        doc = json.loads(out)
        assert code == 0
        assert doc["plan_id"] == plan_id
        assert doc["plan"]["args"] == ["-c", "print(1)"]
        assert doc["plan"]["policy_id"] == POLICY_ID


class TestRunCommand:
    def test_supports_exits_0(self, real_cli: CliRunner, created: PlanCreator) -> None:
        """A hypothesis the real sandbox supports (the probe reads the snapshot) exits 0."""
        code, out, _ = real_cli(
            "run", created("print(open('data.txt').read())"), "--policy", POLICY_ID, "--json"
        )
        assert code == 0
        doc = json.loads(out)
        assert (doc["outcome"], doc["stdout"]) == ("supports", "forty-two\n\n")  # print adds one

    def test_refutes_exits_1(self, cli: CliRunner, created: PlanCreator, stub: StubSandbox) -> None:
        """A refuted hypothesis exits 1."""
        stub.answer = lambda _plan: Canned(exit_code=4)
        plan_id = created("raise SystemExit(4)", failure_refutes=True)
        code, out, _ = cli("run", plan_id, "--policy", POLICY_ID)
        assert code == 1
        assert "refutes" in out
        # docs/ARCHITECTURE.md, "Confirming a refutation": executed twice, in this process.
        assert "confirmed on the same worker" in out
        assert len(stub.executions) == 2

    def test_inconclusive_exits_2(self, cli: CliRunner, created: PlanCreator) -> None:
        """An inconclusive result (model-inferred oracle) exits 2."""
        plan_id = created("print(1)", oracle=exit_oracle("model_inferred"))
        code, out, _ = cli("run", plan_id, "--policy", POLICY_ID)
        assert code == 2
        assert "inconclusive" in out

    def test_policy_mismatch_exits_3(self, cli: CliRunner, created: PlanCreator) -> None:
        """Naming a policy other than the plan's exits 3 with one stderr line."""
        code, _, err = cli("run", created(), "--policy", "other-policy")
        assert code == 3
        assert "other-policy" in err
        assert err.count("\n") == 1

    def test_json_document(self, cli: CliRunner, created: PlanCreator, stub: StubSandbox) -> None:
        """`run --json` prints outcome, reason, status, exit code, output, receipt and reuse."""
        stub.answer = lambda _plan: Canned(stdout=b"hi\n")
        code, out, _ = cli("run", created("print('hi')"), "--policy", POLICY_ID, "--json")
        doc = json.loads(out)
        assert code == 0
        expected = {"outcome", "reason", "status", "exit_code", "stdout", "stderr"}
        assert expected | {"receipt_sha256", "reused"} <= set(doc)
        assert (doc["outcome"], doc["stdout"], doc["reused"]) == ("supports", "hi\n", False)


class TestReceiptCommands:
    @pytest.fixture
    def receipt_file(self, cli: CliRunner, created: PlanCreator, tmp_path: Path) -> Path:
        """A receipt saved by `receipt show --json` after a run."""
        _, out, _ = cli("run", created(), "--policy", POLICY_ID, "--json")
        code, shown, _ = cli("receipt", "show", json.loads(out)["receipt_sha256"], "--json")
        assert code == 0
        path = tmp_path / "receipt.json"
        path.write_text(shown)
        return path

    def test_show_then_verify(self, cli: CliRunner, receipt_file: Path) -> None:
        """A receipt written by `receipt show --json` verifies with exit 0."""
        code, out, _ = cli("receipt", "verify", str(receipt_file), "--json", root=False)
        sha = json.loads(receipt_file.read_text())["receipt_sha256"]
        assert code == 0
        assert json.loads(out) == {"valid": True, "receipt_sha256": sha, "signer": "unsigned"}

    def test_tampered_exits_1_naming_field(self, cli: CliRunner, receipt_file: Path) -> None:
        """A tampered receipt exits 1 and stderr names the field that changed."""
        receipt = json.loads(receipt_file.read_text())
        receipt["committed"]["exit_code"] = 1
        receipt_file.write_text(json.dumps(receipt))
        code, _, err = cli("receipt", "verify", str(receipt_file), root=False)
        assert code == 1
        assert "exit_code" in err


class TestDemo:
    def test_demo_exits_0_with_three_outcomes(self, real_cli: CliRunner, tmp_path: Path) -> None:
        """`demo` runs the three probes in the real sandbox and prints supports, refutes
        and inconclusive; the web view's farm statistics over its store count all three
        (runs in process, docs/ARCHITECTURE.md, "Web view")."""
        code, out, err = real_cli("demo", "--workdir", str(tmp_path / "demo"), root=False)
        assert code == 0, err
        for outcome in ("supports", "refutes", "inconclusive"):
            assert outcome in out
        with ProbeService.open(tmp_path / "demo", interface="web") as svc:
            stats = svc.farm_stats()
        assert stats.outcomes == {"inconclusive": 1, "refutes": 1, "supports": 1}
        assert (stats.in_process_in_window, stats.by_state) == (3, {"done in window": 3})


class TestReuseIsExact:
    def test_fixed_environment_is_not_served_the_old_receipt(
        self,
        cli: CliRunner,
        created: PlanCreator,
        monkeypatch: pytest.MonkeyPatch,
        stub: StubSandbox,
    ) -> None:
        """A changed value of a policy-passed variable runs again; after --no-reuse, later
        runs serve the newest receipt, never the old one."""
        # The stub answers as the probe would see LANG, which the policy passes through.
        stub.answer = lambda _plan: Canned(exit_code=0 if os.environ["LANG"] == "C.UTF-8" else 1)
        plan_id = created(
            "import os, sys; sys.exit(0 if os.environ.get('LANG') == 'C.UTF-8' else 1)",
            failure_refutes=True,
        )

        def run(*extra: str) -> dict[str, Any]:
            code, out, err = cli("run", plan_id, "--policy", POLICY_ID, "--json", *extra)
            doc: dict[str, Any] = json.loads(out)
            assert code == (0 if doc["outcome"] == "supports" else 1), err
            return doc

        monkeypatch.setenv("LANG", "broken")
        assert run()["outcome"] == "refutes"
        monkeypatch.setenv("LANG", "C.UTF-8")
        fixed = run()
        assert (fixed["outcome"], fixed["reused"]) == ("supports", False)
        fresh = run("--no-reuse")
        assert (fresh["reused"], fresh["receipt_sha256"] != fixed["receipt_sha256"]) == (
            False,
            True,
        )
        again = run()
        assert (again["reused"], again["receipt_sha256"]) == (True, fresh["receipt_sha256"])
        assert len(stub.executions) == 4  # refuted and confirmed, fixed, fresh; again reused
