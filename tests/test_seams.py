"""The sandbox seam: the stub sandbox cannot be selected outside tests, and the real one
is every face's default (docs/ARCHITECTURE.md, "Seams"; SECURITY.md)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import probe_service
from probe_service.cli import main as cli_main
from probe_service.plans import plan_id_of, probe_run
from probe_service.plans.execution import RuntimeBackend
from probe_service.policies import load_policy_file
from probe_service.queue import WorkerContext
from probe_service.sandbox import SANDBOX_DIR_ENV
from probe_service.service import ProbeService
from probe_service.store import Store, open_store

from .calls import probe_plan as create_plan
from .calls import probe_run as service_probe_run
from .calls import snapshot_capture
from .stubsandbox import STUB_SANDBOX_DIGEST, Canned, StubSandbox

PACKAGE = Path(probe_service.__file__).resolve().parent
POLICY_ID = "seams"


def _package_sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _policy_file(directory: Path) -> Path:
    path = directory / "policies.json"
    policy = {
        "id": POLICY_ID,
        "allowed_executables": ["python3"],
        "timeout_seconds": 20,
        "max_output_bytes": 10_000,
        "allowed_domains": [],
        "environment": [],
    }
    path.write_text(json.dumps({"schema": 1, "policies": [policy]}))
    path.chmod(0o600)
    return path


def _plan(store: Store, repo: Path, code: str = "print('seam')", **fields: object) -> str:
    (repo / "data.txt").write_text("data\n")
    snapshot_id = snapshot_capture(store, repo).snapshot_id
    doc = {
        "snapshot_id": snapshot_id,
        "policy_id": POLICY_ID,
        "executable": "python3",
        "args": ["-c", code],
        "oracle": {
            "check": {"kind": "exit_code", "equals": 0},
            "source": "user_requirement",
            "reference": "issue #25",
        },
        **fields,
    }
    return create_plan(store, doc).plan_id


class TestTheStubStaysInTests:
    def test_no_package_module_names_the_stub(self) -> None:
        """No source file of the package mentions the stub's module, class or digest."""
        named = [
            str(path.relative_to(PACKAGE))
            for path in _package_sources()
            if any(
                word in path.read_text(encoding="utf-8")
                for word in ("stubsandbox", "StubSandbox", STUB_SANDBOX_DIGEST)
            )
        ]
        assert named == []

    def test_no_package_module_imports_from_tests(self) -> None:
        """No import statement anywhere in the package reaches the ``tests`` package."""
        found = []
        for path in _package_sources():
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                found += [f"{path.name}: {n}" for n in names if n.split(".")[0] == "tests"]
        assert found == []

    def test_the_installed_package_cannot_import_the_stub(self) -> None:
        """Outside the checkout, the package's own interpreter has no ``tests`` to import:
        the stub exists only where the test suite does (the wheel holds ``probe_service``
        alone)."""
        code = (
            "import probe_service.plans.execution, probe_service.service\n"
            "try:\n"
            "    import tests.stubsandbox\n"
            "except ModuleNotFoundError:\n"
            "    print('absent')\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd="/",
            env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert (done.returncode, done.stdout.strip()) == (0, "absent"), done.stderr

    def test_the_stub_digest_is_no_runtime_digest(self) -> None:
        """A runtime digest is a SHA-256 in hex; the stub's says it is a stub."""
        assert "stub" in STUB_SANDBOX_DIGEST
        assert not all(c in "0123456789abcdef" for c in STUB_SANDBOX_DIGEST)


class TestTheRealBackendIsTheDefault:
    def test_a_session_runs_through_the_real_backend(self, sqlite_store: Store) -> None:
        """``ProbeService`` without a backend executes through the real sandbox."""
        assert type(ProbeService(sqlite_store).backend) is RuntimeBackend

    def test_an_opened_session_runs_through_the_real_backend(self, tmp_path: Path) -> None:
        """``ProbeService.open`` (every face's way in) executes through the real sandbox."""
        with ProbeService.open(tmp_path / "state", lazy=True) as svc:
            assert type(svc.backend) is RuntimeBackend

    def test_a_worker_runs_through_the_real_backend(self, sqlite_store: Store) -> None:
        """A ``WorkerContext`` without a backend executes through the real sandbox."""
        assert type(WorkerContext(store=sqlite_store).backend) is RuntimeBackend

    def test_probe_run_without_a_backend_asks_the_real_runtime(
        self, sqlite_store: Store, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """``probe_run`` without a backend locates the pinned runtime: with none installed
        where it looks, the run ends inconclusive with the runtime's own reason."""
        plan_id = _plan(sqlite_store, repo)
        empty = tmp_path / "no-runtime"
        empty.mkdir()
        policy_file = load_policy_file(_policy_file(tmp_path))
        result = probe_run(
            sqlite_store, plan_id, POLICY_ID, policy_file=policy_file, environ={}, sandbox_dir=empty
        )
        committed = result.receipt.committed.to_json()
        assert (result.outcome, committed["sandbox_digest"]) == ("inconclusive", "unverified")
        assert result.reason.startswith("sandbox_")

    def test_the_cli_runs_through_the_real_backend(
        self,
        tmp_path: Path,
        repo: Path,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        """`byte-probe run` as the console script calls it (no backend) locates the pinned
        runtime, and no command offers an option naming a backend, sandbox or stub."""
        root = tmp_path / "state"
        root.mkdir()
        store = open_store(root)
        plan_id = _plan(store, repo)
        store.close()
        monkeypatch.setenv("BYTE_PROBE_POLICY_FILE", str(_policy_file(tmp_path)))
        empty = tmp_path / "no-runtime"
        empty.mkdir()
        monkeypatch.setenv(SANDBOX_DIR_ENV, str(empty))
        code = cli_main(["run", plan_id, "--policy", POLICY_ID, "--json", "--root", str(root)])
        doc = json.loads(capsys.readouterr().out)
        assert (code, doc["outcome"]) == (2, "inconclusive")
        assert doc["reason"].startswith("sandbox_")
        for command in ("run", "submit", "worker", "host", "mcp", "web", "demo"):
            cli_main([command, "--help"])
            shown = capsys.readouterr().out.lower()
            assert not {"--backend", "--sandbox", "--stub"} & set(shown.split()), command


#: A JUnit report with one failed test case, as a probe would leave it in scratch.
FAILED_REPORT = (
    b'<testsuite name="s" tests="1" failures="1">'
    b'<testcase classname="parser" name="trailing_comma"><failure message="x"/></testcase>'
    b"</testsuite>"
)


class TestTheStub:
    def test_it_executes_nothing_of_the_plan(
        self, sqlite_store: Store, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A plan whose probe would write a host file runs through the stub: the file never
        appears, and the receipt says who answered."""
        marker = tmp_path / "ran"
        plan_id = _plan(sqlite_store, repo, f"open({str(marker)!r}, 'w').write('x')")
        monkeypatch.setenv("BYTE_PROBE_POLICY_FILE", str(_policy_file(tmp_path)))
        stub = StubSandbox()
        result = service_probe_run(sqlite_store, plan_id, POLICY_ID, backend=stub)
        assert not marker.exists()
        assert (result.outcome, result.receipt.operational.launcher) == ("supports", "stub")
        assert [plan_id_of(r.plan) for r in stub.executions] == [plan_id]

    def test_the_real_oracle_and_rules_judge_its_answer(
        self, sqlite_store: Store, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A JUnit report the stub leaves in scratch is decoded by the real oracle; a failed
        case refutes once confirmed, by a second execution, like a real run's."""
        junit = {
            "check": {"kind": "junit_xml", "path": "out/report.xml"},
            "source": "historical_regression",
            "reference": "issue #25",
        }
        plan_id = _plan(sqlite_store, repo, oracle=junit, failure_refutes=True)
        monkeypatch.setenv("BYTE_PROBE_POLICY_FILE", str(_policy_file(tmp_path)))
        stub = StubSandbox(Canned(exit_code=1, scratch_files={"out/report.xml": FAILED_REPORT}))
        result = service_probe_run(sqlite_store, plan_id, POLICY_ID, backend=stub)
        committed = result.receipt.committed.to_json()
        assert (result.outcome, result.reason) == ("refutes", "oracle_failed")
        assert committed["check"]["passed"] is False
        assert committed["confirmation"]["state"] == "confirmed"
        assert len(stub.executions) == 2


class TestStubReceiptsAreNoEvidence:
    def test_a_real_run_never_reuses_a_stub_receipt(
        self,
        sqlite_store: Store,
        repo: Path,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
        runtime: object,
    ) -> None:
        """The same plan run by the stub and then by the real sandbox has two action keys:
        the real run executes, and only its receipt names the runtime's digest."""
        plan_id = _plan(sqlite_store, repo)
        monkeypatch.setenv("BYTE_PROBE_POLICY_FILE", str(_policy_file(tmp_path)))
        stub = StubSandbox(Canned(stdout=b"seam\n"))
        stubbed = service_probe_run(sqlite_store, plan_id, POLICY_ID, backend=stub)
        real = service_probe_run(sqlite_store, plan_id, POLICY_ID)
        assert stubbed.receipt.committed.sandbox_digest == STUB_SANDBOX_DIGEST
        assert stubbed.receipt.operational.launcher == "stub"
        assert (stubbed.outcome, real.outcome, real.reused) == ("supports", "supports", False)
        assert real.receipt.committed.action_key != stubbed.receipt.committed.action_key
        assert real.receipt.committed.sandbox_digest != STUB_SANDBOX_DIGEST
        assert real.receipt.operational.launcher in {"helper", "cli"}
        assert len(stub.executions) == 1
