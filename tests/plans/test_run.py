"""probe_run end to end through the REAL Sandbox Runtime: outcomes, policy, overlay; and
reuse, whose runs the stub sandbox answers (reuse is decided after the execution).

Every other run here launches the pinned runtime (bubblewrap on Linux); nothing is mocked.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from probe_service.errors import NotFound, PolicyError
from probe_service.plans import ProbeRunResult, find_reusable_receipt, verify_receipt
from probe_service.plans.tables import receipts
from probe_service.policies import POLICY_FILE_ENV
from probe_service.sandbox import SANDBOX_DIR_ENV, SandboxRuntime
from probe_service.store import Store, open_store, read_events

from .. import calls as service
from ..security.attacks import emptied_slot_dir
from ..stubsandbox import StubSandbox
from .conftest import oracle_doc, plan_doc

POLICY_ID = "test-run"
REPO_ROOT = Path(__file__).resolve().parents[2]


def policy_document(**overrides: Any) -> dict[str, Any]:
    policy: dict[str, Any] = {
        "id": POLICY_ID,
        "allowed_executables": ["python3", "sh"],
        "executable_pins": {"sh": "/usr/bin/dash"},
        "timeout_seconds": 20,
        "max_output_bytes": 100_000,
        "allowed_domains": [],
        "environment": ["PATH", "LANG"],
    }
    policy.update(overrides)
    return {"schema": 1, "policies": [policy]}


PolicyWriter = Callable[..., Path]


@pytest.fixture
def write_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> PolicyWriter:
    """Write the administrator policy file (mode 0600) and point BYTE_PROBE_POLICY_FILE at it."""
    path = tmp_path / "admin" / "probe-policies.json"
    path.parent.mkdir()

    def _write(**overrides: Any) -> Path:
        path.write_text(json.dumps(policy_document(**overrides)))
        path.chmod(0o600)
        monkeypatch.setenv(POLICY_FILE_ENV, str(path))
        return path

    _write()
    return _write


def write_small_repo(repo: Path) -> None:
    (repo / "data.txt").write_text("original\n")
    (repo / "obsolete.txt").write_text("present\n")
    (repo / "pkg").mkdir()
    (repo / "pkg" / "answer.py").write_text("ANSWER = 42\n")


@pytest.fixture
def snapshot_id(sqlite_store: Store, repo: Path) -> str:
    """A captured snapshot of a small repository."""
    write_small_repo(repo)
    return service.snapshot_capture(sqlite_store, repo).snapshot_id


PlanMaker = Callable[..., str]


@pytest.fixture
def make_plan(sqlite_store: Store, snapshot_id: str) -> PlanMaker:
    """Store a plan running ``python3 -c CODE`` against the snapshot; return its id."""

    def _make(code: str = "print('hello')", **overrides: Any) -> str:
        overrides.setdefault("args", ["-c", code])
        doc = plan_doc(snapshot_id=snapshot_id, policy_id=POLICY_ID, **overrides)
        return service.probe_plan(sqlite_store, doc).plan_id

    return _make


Runner = Callable[..., ProbeRunResult]


@pytest.fixture
def run(sqlite_store: Store, runtime: SandboxRuntime, write_policy: PolicyWriter) -> Runner:
    """Run a stored plan under POLICY_ID with the verified runtime."""

    def _run(plan_id: str, policy_id: str = POLICY_ID, **kw: Any) -> ProbeRunResult:
        kw.setdefault("runtime", runtime)
        return service.probe_run(sqlite_store, plan_id, policy_id, **kw)

    return _run


@pytest.fixture
def stub_run(sqlite_store: Store, stub_sandbox: StubSandbox, write_policy: PolicyWriter) -> Runner:
    """Run a stored plan under POLICY_ID, its probe answered by the stub sandbox."""

    def _run(plan_id: str, policy_id: str = POLICY_ID, **kw: Any) -> ProbeRunResult:
        return service.probe_run(sqlite_store, plan_id, policy_id, backend=stub_sandbox, **kw)

    return _run


def receipt_rows(store: Store) -> int:
    with store.reading() as conn:
        return int(conn.execute(select(func.count()).select_from(receipts)).scalar_one())


def contains(text: str, source: str = "user_requirement") -> dict[str, Any]:
    reference = None if source == "model_inferred" else "issue #1"
    return oracle_doc({"kind": "stdout_contains", "text": text}, source, reference)


def exits(code: int, source: str = "historical_regression") -> dict[str, Any]:
    return oracle_doc({"kind": "exit_code", "equals": code}, source, "issue #7")


SUPPORTED_CODE = "from pkg.answer import ANSWER; print('answer', ANSWER, open('data.txt').read())"


@pytest.fixture(scope="class")
def supported(
    tmp_path_factory: pytest.TempPathFactory, runtime: SandboxRuntime
) -> Iterator[tuple[Store, ProbeRunResult]]:
    """One real supported run (own store, repo and policy file), shared read-only by a class."""
    base = tmp_path_factory.mktemp("supported")
    (base / "state").mkdir()
    (base / "repo").mkdir()
    write_small_repo(base / "repo")
    policy = base / "probe-policies.json"
    policy.write_text(json.dumps(policy_document()))
    policy.chmod(0o600)
    store = open_store(base / "state")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(POLICY_FILE_ENV, str(policy))
        snapshot = service.snapshot_capture(store, base / "repo").snapshot_id
        doc = plan_doc(
            snapshot_id=snapshot,
            policy_id=POLICY_ID,
            args=["-c", SUPPORTED_CODE],
            oracle=contains("answer 42 original"),
        )
        plan_id = service.probe_plan(store, doc).plan_id
        result = service.probe_run(store, plan_id, POLICY_ID, runtime=runtime)
    yield store, result
    store.close()


class TestSupportedRun:
    """One real run that supports its hypothesis, looked at from several sides."""

    @pytest.fixture
    def result(self, supported: tuple[Store, ProbeRunResult]) -> ProbeRunResult:
        return supported[1]

    def test_supports(self, result: ProbeRunResult) -> None:
        """A trusted oracle whose check passes gives supports / oracle_passed."""
        assert (result.outcome, result.reason, result.status) == (
            "supports",
            "oracle_passed",
            "ok",
        )
        assert result.exit_code == 0
        assert result.reused is False

    def test_receipt_verifies(self, result: ProbeRunResult) -> None:
        """The returned receipt verifies offline to the sha the run reported."""
        assert verify_receipt(result.receipt) == result.receipt_sha256

    def test_receipt_stored_with_event(self, supported: tuple[Store, ProbeRunResult]) -> None:
        """The receipt is stored once and announced by one probe event."""
        store, result = supported
        assert service.receipt_get(store, result.run_id) == result.receipt
        with store.reading() as conn:
            kinds = [e.kind for e in read_events(conn, 0, 100)]
        assert kinds == ["snapshot", "plan", "probe"]

    def test_receipt_commits_to_inputs(
        self, result: ProbeRunResult, runtime: SandboxRuntime
    ) -> None:
        """The commitment names the plan, policy, sandbox digest and executable identity."""
        committed = result.receipt.committed.to_json()
        assert committed["plan_id"] == result.plan_id
        assert committed["policy_id"] == POLICY_ID
        assert committed["sandbox_digest"] == runtime.digest
        assert committed["executable"]["sha256"]
        assert committed["elapsed_us"] > 0


class TestOutcomes:
    def test_refutes_when_trusted_failure_refutes(self, make_plan: PlanMaker, run: Runner) -> None:
        """A trusted oracle that fails with failure_refutes gives refutes."""
        plan_id = make_plan("import sys; sys.exit(3)", oracle=exits(0), failure_refutes=True)
        result = run(plan_id)
        assert (result.outcome, result.reason, result.exit_code) == ("refutes", "oracle_failed", 3)

    def test_failure_without_failure_refutes_is_inconclusive(
        self, make_plan: PlanMaker, run: Runner
    ) -> None:
        """A failed check of a plan that did not declare failure_refutes is inconclusive."""
        result = run(make_plan("print('no')", oracle=contains("yes")))
        assert (result.outcome, result.reason) == ("inconclusive", "oracle_failed")

    def test_model_inferred_pass_is_inconclusive(self, make_plan: PlanMaker, run: Runner) -> None:
        """A model_inferred oracle stays inconclusive even though its check passes."""
        result = run(make_plan("print('yes')", oracle=contains("yes", "model_inferred")))
        assert (result.outcome, result.reason) == ("inconclusive", "model_inferred_oracle")

    def test_timeout_is_inconclusive_even_when_failure_refutes(
        self, make_plan: PlanMaker, run: Runner, write_policy: PolicyWriter
    ) -> None:
        """A probe killed by the policy timeout is inconclusive/timeout, never refutes."""
        write_policy(timeout_seconds=1)
        plan_id = make_plan("import time; time.sleep(30)", oracle=exits(0), failure_refutes=True)
        result = run(plan_id)
        assert (result.outcome, result.reason, result.status) == (
            "inconclusive",
            "timeout",
            "timeout",
        )


class TestPolicyAndPlanLookup:
    def test_policy_id_mismatch(self, make_plan: PlanMaker, run: Runner) -> None:
        """Naming a policy other than the plan's raises PolicyError and writes nothing."""
        plan_id = make_plan()
        with pytest.raises(PolicyError, match="does not equal"):
            run(plan_id, "another-policy")

    def test_policy_absent_from_file(
        self, sqlite_store: Store, snapshot_id: str, run: Runner
    ) -> None:
        """A plan naming a policy the administrator's file lacks raises PolicyError."""
        doc = plan_doc(snapshot_id=snapshot_id, policy_id="not-in-file")
        plan_id = service.probe_plan(sqlite_store, doc).plan_id
        with pytest.raises(PolicyError, match="not-in-file"):
            run(plan_id, "not-in-file")
        assert receipt_rows(sqlite_store) == 0

    def test_writable_policy_file_refused(
        self, make_plan: PlanMaker, run: Runner, write_policy: PolicyWriter
    ) -> None:
        """A group-writable policy file is refused before anything runs."""
        write_policy().chmod(0o620)
        with pytest.raises(PolicyError, match="writable"):
            run(make_plan())

    def test_plan_not_stored(self, run: Runner) -> None:
        """Running an id that names no stored plan raises NotFound."""
        with pytest.raises(NotFound):
            run("0" * 64)


class TestReuse:
    def test_second_run_reuses_the_receipt(
        self,
        make_plan: PlanMaker,
        stub_run: Runner,
        sqlite_store: Store,
        stub_sandbox: StubSandbox,
    ) -> None:
        """The same action again returns the first receipt, reused, with no new row."""
        plan_id = make_plan()
        first = stub_run(plan_id)
        second = stub_run(plan_id)
        assert second.reused is True
        assert second.receipt_sha256 == first.receipt_sha256
        assert second.run_id == first.run_id
        assert receipt_rows(sqlite_store) == 1
        assert len(stub_sandbox.executions) == 1

    def test_no_reuse_runs_again(
        self, make_plan: PlanMaker, stub_run: Runner, sqlite_store: Store
    ) -> None:
        """reuse=False executes anew and writes a second receipt."""
        plan_id = make_plan()
        first = stub_run(plan_id)
        second = stub_run(plan_id, reuse=False)
        assert second.reused is False
        assert second.run_id != first.run_id
        assert receipt_rows(sqlite_store) == 2

    def test_edited_policy_is_a_new_action(
        self,
        make_plan: PlanMaker,
        stub_run: Runner,
        write_policy: PolicyWriter,
        sqlite_store: Store,
    ) -> None:
        """Editing the policy body (its timeout) changes the action key: no reuse."""
        plan_id = make_plan()
        first = stub_run(plan_id)
        write_policy(timeout_seconds=19)
        second = stub_run(plan_id)
        assert second.reused is False
        assert (
            second.receipt.committed.to_json()["action_key"]
            != first.receipt.committed.to_json()["action_key"]
        )
        assert receipt_rows(sqlite_store) == 2


@pytest.fixture
def broken_runtime_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the pinned install with one runtime file altered, selected by env."""
    copy = tmp_path / "sandbox-copy"
    shutil.copytree(REPO_ROOT / "sandbox", copy, symlinks=True)
    target = copy / "node_modules" / "@anthropic-ai" / "sandbox-runtime" / "package.json"
    target.write_text(target.read_text() + "\n")
    monkeypatch.setenv(SANDBOX_DIR_ENV, str(copy))
    return copy


class TestBrokenRuntime:
    @pytest.fixture
    def refused(
        self, make_plan: PlanMaker, run: Runner, broken_runtime_dir: Path
    ) -> tuple[str, ProbeRunResult]:
        """A plan and its run under the altered runtime."""
        plan_id = make_plan("print('hello')", oracle=contains("hello"))
        return plan_id, run(plan_id, runtime=None)

    def test_inconclusive_sandbox_unverified(self, refused: tuple[str, ProbeRunResult]) -> None:
        """A runtime whose files differ from the pinned digest is never launched."""
        _, result = refused
        assert (result.outcome, result.reason) == ("inconclusive", "sandbox_unverified")
        assert result.exit_code is None

    def test_receipt_written_and_verifies(
        self, refused: tuple[str, ProbeRunResult], sqlite_store: Store
    ) -> None:
        """The refusal is recorded as a stored receipt that verifies offline."""
        _, result = refused
        stored = service.receipt_get(sqlite_store, result.run_id)
        assert verify_receipt(stored) == result.receipt_sha256

    def test_not_reusable(self, refused: tuple[str, ProbeRunResult], sqlite_store: Store) -> None:
        """A refused run never answers a later identical action."""
        _, result = refused
        action_key = result.receipt.committed.to_json()["action_key"]
        assert find_reusable_receipt(sqlite_store, action_key) is None

    def test_same_refusal_twice_does_not_crash(
        self, refused: tuple[str, ProbeRunResult], run: Runner
    ) -> None:
        """Refused again with identical committed content, the run returns the stored receipt."""
        plan_id, first = refused
        again = run(plan_id, runtime=None)
        assert again.reused is False
        assert (again.reason, again.receipt_sha256) == ("sandbox_unverified", first.receipt_sha256)


class TestOverlay:
    def test_intervention_through_snapshot_symlink(
        self, sqlite_store: Store, tmp_path: Path, run: Runner
    ) -> None:
        """An intervention under a symlink of the snapshot is refused: overlay_failed."""
        tree = tmp_path / "linked-repo"
        (tree / "dir").mkdir(parents=True)
        (tree / "dir" / "kept").write_text("kept")
        # An internal link (an escaping one is refused before the overlay, see test_links).
        (tree / "link").symlink_to("dir")
        snapshot_id = service.snapshot_capture(sqlite_store, tree).snapshot_id
        doc = plan_doc(
            snapshot_id=snapshot_id,
            policy_id=POLICY_ID,
            interventions=[{"path": "link/x", "content": "escaped"}],
        )
        plan_id = service.probe_plan(sqlite_store, doc).plan_id
        result = run(plan_id)
        assert (result.outcome, result.reason) == ("inconclusive", "overlay_failed")
        assert verify_receipt(result.receipt) == result.receipt_sha256

    def test_fixtures_and_scratch_check(self, make_plan: PlanMaker, run: Runner) -> None:
        """Fixtures appear under BYTE_PROBE_SCRATCH and the oracle sees a file the probe wrote."""
        code = (
            "import os; d = os.environ['BYTE_PROBE_SCRATCH']; "
            "text = open(os.path.join(d, 'in', 'a.txt')).read(); "
            "open(os.path.join(d, 'out.txt'), 'w').write(text.upper())"
        )
        check = {"kind": "scratch_file_equals", "path": "out.txt", "text": "FIXTURE"}
        plan_id = make_plan(
            code,
            fixtures=[{"path": "in/a.txt", "content": "fixture"}],
            oracle=oracle_doc(check),
        )
        result = run(plan_id)
        assert (result.outcome, result.reason) == ("supports", "oracle_passed"), result.stderr

    def test_interventions_seen_by_probe(self, make_plan: PlanMaker, run: Runner) -> None:
        """A modified file and a deleted file are what the probe sees in its snapshot."""
        code = "import os; print(open('data.txt').read().strip(), os.path.exists('obsolete.txt'))"
        plan_id = make_plan(
            code,
            interventions=[
                {"path": "data.txt", "content": "changed\n"},
                {"path": "obsolete.txt", "delete": True},
            ],
            oracle=oracle_doc({"kind": "stdout_equals", "text": "changed False\n"}),
        )
        result = run(plan_id)
        assert (result.outcome, result.stdout) == ("supports", "changed False\n"), result.stderr


@pytest.fixture
def fresh_tmpdir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Point TMPDIR and tempfile at a new, empty directory for the length of one test."""
    fresh = Path(tempfile.mkdtemp(prefix="probe-run-tmpdir-"))
    fresh.chmod(0o711)  # like /tmp: the probe's uid must be able to pass through it
    monkeypatch.setenv("TMPDIR", str(fresh))
    monkeypatch.setattr(tempfile, "tempdir", str(fresh))
    yield fresh
    shutil.rmtree(fresh)


class TestCleanup:
    def test_disposable_directories_removed(
        self, make_plan: PlanMaker, run: Runner, fresh_tmpdir: Path
    ) -> None:
        """After a run that wrote into scratch and the snapshot, no temporary entry is left."""
        code = (
            "import os; d = os.environ['BYTE_PROBE_SCRATCH']; os.makedirs(d + '/deep/er'); "
            "open(d + '/deep/er/f', 'w').write('x'); os.chmod(d + '/deep', 0o500); print('ok')"
        )
        result = run(make_plan(code, oracle=contains("ok")))
        assert result.outcome == "supports", result.receipt.operational.to_json()["detail"]
        assert _left_in(fresh_tmpdir) == []

    def test_removed_after_overlay_failure(
        self, make_plan: PlanMaker, run: Runner, fresh_tmpdir: Path
    ) -> None:
        """A run refused at the overlay also leaves no temporary entry behind."""
        plan_id = make_plan(interventions=[{"path": "data.txt/x", "content": "x"}])
        assert run(plan_id).reason == "overlay_failed"
        assert _left_in(fresh_tmpdir) == []


def _left_in(tmpdir: Path) -> list[str]:
    """Every entry in ``tmpdir`` but a run slot's kept run directory, emptied after its run
    (docs/ARCHITECTURE.md, "Mount namespaces")."""
    return sorted(name for name in os.listdir(tmpdir) if not emptied_slot_dir(tmpdir / name))


def test_retention_bounds_the_warm_cache(
    stub_run: Runner, make_plan: PlanMaker, write_policy: PolicyWriter
) -> None:
    """A policy file's retention.warm_cache_bytes is the bound of the worker's warm cache
    (least recently used first) from its next run on."""
    from probe_service.plans.warm import DEFAULT_CACHE_BYTES, default_snapshot_cache

    path = write_policy()
    document = json.loads(path.read_text())
    bound = 32 << 20
    document.update(schema=3, retention={"runs_days": 30, "warm_cache_bytes": bound})
    path.write_text(json.dumps(document))
    assert default_snapshot_cache().max_bytes == DEFAULT_CACHE_BYTES
    stub_run(make_plan())
    assert default_snapshot_cache().max_bytes == bound
