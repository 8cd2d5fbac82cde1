"""A repository's real pytest suite, run from a toolchain inside the REAL sandbox.

Nothing is mocked: the toolchain is a virtualenv our ``toolchain create`` built with pip
(once per session), the probe runs under the pinned Sandbox Runtime as a slot uid, and
every receipt is verified offline.
"""

from __future__ import annotations

import base64
import io
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from probe_service.cli.results import print_receipt
from probe_service.plans import ProbeRunResult, receipt_cases, verify_receipt
from probe_service.policies import Policy
from probe_service.sandbox import SandboxRuntime, run_sandboxed
from probe_service.store import Store
from probe_service.toolchains import digest_toolchain, resolve_toolchains

from .. import calls as service
from .conftest import BASE_PYTHON, PolicyWriter, policy_entry

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pysuite"
PYTEST = ["-m", "pytest", "-q", "--junitxml=$BYTE_PROBE_SCRATCH/report.xml"]
ADD, DIVIDE = "tests.test_calc::test_add", "tests.test_calc::test_safe_divide_by_zero_is_none"


def junit_oracle(*require: str) -> dict[str, Any]:
    return {
        "check": {"kind": "junit_xml", "require": list(require)},
        "source": "user_requirement",
        "reference": "calc.safe_divide docstring",
    }


Prober = Callable[..., ProbeRunResult]


@pytest.fixture
def probe(
    sqlite_store: Store,
    tmp_path: Path,
    runtime: SandboxRuntime,
    write_policy: PolicyWriter,
    toolchain_with_pytest: Path,
) -> Prober:
    """Capture examples/pysuite; store a plan with ``overrides``; run it under python-tests."""
    shutil.copytree(EXAMPLE, tmp_path / "repo")
    snapshot = service.snapshot_capture(sqlite_store, tmp_path / "repo").snapshot_id
    write_policy(
        policy_entry(
            toolchains={"py311-pytest": str(toolchain_with_pytest)},
            executable_pins={"python3": f"{toolchain_with_pytest}/bin/python"},
        )
    )

    def _probe(**overrides: Any) -> ProbeRunResult:
        doc: dict[str, Any] = {
            "snapshot_id": snapshot,
            "policy_id": "python-tests",
            "executable": "python3",
            "args": PYTEST,
            "oracle": junit_oracle(),
            "failure_refutes": True,
        }
        doc.update(overrides)
        plan_id = service.probe_plan(sqlite_store, doc).plan_id
        return service.probe_run(sqlite_store, plan_id, "python-tests", runtime=runtime)

    return _probe


class TestSuiteAsProbe:
    def test_real_pytest_suite_runs_from_a_toolchain(
        self, probe: Prober, toolchain_with_pytest: Path, sqlite_store: Store
    ) -> None:
        """pytest from the toolchain runs the suite; the receipt (version 2) commits every
        test by its case list's digest, the failing one whole, and the digests."""
        result = probe(preflight=[["python3", "-c", "import pytest"]])
        committed = result.receipt.committed.to_json()
        assert (result.outcome, result.reason, result.exit_code) == ("refutes", "oracle_failed", 1)
        assert committed["version"] == 2
        cases = receipt_cases(sqlite_store, result.receipt)
        assert cases is not None
        assert [(c.id, c.outcome) for c in cases] == [(ADD, "passed"), (DIVIDE, "failed")]
        [failing] = committed["junit"]["not_passed"]
        assert failing["id"] == DIVIDE
        assert "ZeroDivisionError" in failing["message"]
        assert len(committed["junit"]["report_sha256"]) == 64
        [toolchain] = committed["toolchains"]
        assert toolchain["sha256"] == digest_toolchain(toolchain_with_pytest).sha256
        assert toolchain["external"][0]["path"] == str(BASE_PYTHON.resolve())
        assert [(p["argv"][0], p["exit_code"]) for p in committed["preflight"]] == [("python3", 0)]
        assert verify_receipt(result.receipt) == result.receipt_sha256

    def test_a_suite_writing_its_cache_still_refutes(self, probe: Prober) -> None:
        """pytest with its cache on warns that the read-only source refused the cache; that
        refusal explains no failure, so the failing suite still refutes."""
        result = probe(args=[*PYTEST, "-p", "cacheprovider", "-o", "addopts="])
        output = result.stdout + result.stderr
        assert "PytestCacheWarning" in output
        assert "Read-only file system" in output
        assert (result.outcome, result.reason) == ("refutes", "oracle_failed")

    def test_a_named_subset_that_passes_supports(self, probe: Prober) -> None:
        """Requiring only the passing test supports, though the suite as a whole fails."""
        result = probe(oracle=junit_oracle(ADD))
        assert (result.outcome, result.reason) == ("supports", "oracle_passed")

    def test_a_missing_dependency_is_preflight_failed_never_refutes(self, probe: Prober) -> None:
        """A failing preflight ends inconclusive/preflight_failed with its output kept."""
        result = probe(preflight=[["python3", "-c", "import a_module_nobody_installed"]])
        committed = result.receipt.committed.to_json()
        assert (result.outcome, result.reason) == ("inconclusive", "preflight_failed")
        assert committed["exit_code"] is None  # the probe itself never ran
        assert committed["preflight"][0]["exit_code"] == 1
        kept = result.receipt.operational.to_json()["preflight_output"][0]["stderr_b64"]
        assert b"ModuleNotFoundError" in base64.b64decode(kept)
        assert verify_receipt(result.receipt) == result.receipt_sha256

    def test_the_toolchain_digest_keys_reuse(
        self, probe: Prober, toolchain_with_pytest: Path
    ) -> None:
        """An unchanged toolchain lets a decided run be reused (same digest, same key)."""
        first = probe(oracle=junit_oracle(ADD))
        again = probe(oracle=junit_oracle(ADD))
        assert again.reused
        assert again.receipt_sha256 == first.receipt_sha256


def _small_policy(tree: Path, **overrides: Any) -> Policy:
    fields = policy_entry(
        toolchains={"small": str(tree)}, executable_pins={"python3": str(BASE_PYTHON)}
    )
    fields.update(overrides)
    return Policy.model_validate(fields)


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    """An empty snapshot and an empty scratch directory."""
    (tmp_path / "snapshot").mkdir()
    (tmp_path / "scratch").mkdir()
    return tmp_path / "snapshot", tmp_path / "scratch"


class TestToolchainGrants:
    def test_the_probe_reads_and_runs_its_toolchain(
        self, tree: Path, dirs: tuple[Path, Path], runtime: SandboxRuntime
    ) -> None:
        """Code in the toolchain is importable and its scripts executable in the sandbox."""
        policy = _small_policy(tree)
        code = f"import sys, subprocess; sys.path.insert(0, '{tree}/lib'); import helper; "
        code += f"print(helper.VALUE, subprocess.run(['{tree}/bin/tool']).returncode)"
        result = run_sandboxed(
            environment=os.environ,
            policy=policy,
            executable="python3",
            args=["-c", code],
            snapshot_dir=dirs[0],
            scratch_dir=dirs[1],
            runtime=runtime,
            toolchains=resolve_toolchains(policy),
        )
        assert (result.status, result.exit_code) == ("ok", 0), result.stderr
        assert result.stdout.split() == [b"tool", b"42", b"0"]

    def test_the_probe_cannot_write_into_its_toolchain(
        self, tree: Path, dirs: tuple[Path, Path], runtime: SandboxRuntime
    ) -> None:
        """Writing, replacing or deleting toolchain files fails; the tree is unchanged."""
        policy = _small_policy(tree)
        before = digest_toolchain(tree).sha256
        code = (
            "import os\n"
            f"for act in (lambda: open('{tree}/lib/new.py', 'w'),\n"
            f"            lambda: open('{tree}/lib/helper.py', 'a'),\n"
            f"            lambda: os.unlink('{tree}/lib/helper.py')):\n"
            "    try:\n        act(); print('WROTE')\n"
            "    except OSError as exc:\n        print(exc.strerror)\n"
        )
        result = run_sandboxed(
            environment=os.environ,
            policy=policy,
            executable="python3",
            args=["-c", code],
            snapshot_dir=dirs[0],
            scratch_dir=dirs[1],
            runtime=runtime,
            toolchains=resolve_toolchains(policy),
        )
        assert result.status == "ok", result.stderr
        assert b"WROTE" not in result.stdout
        assert result.stdout.count(b"\n") == 3
        assert digest_toolchain(tree).sha256 == before

    def test_a_toolchain_changed_after_resolution_never_runs(
        self, tree: Path, dirs: tuple[Path, Path], runtime: SandboxRuntime
    ) -> None:
        """A tree that differs at launch from its resolved digest ends toolchain_changed."""
        policy = _small_policy(tree)
        resolved = resolve_toolchains(policy)
        (tree / "lib" / "helper.py").write_text("VALUE = 'swapped'\n")
        marker = dirs[1] / "ran"
        result = run_sandboxed(
            environment=os.environ,
            policy=policy,
            executable="python3",
            args=["-c", f"open('{marker}', 'w')"],
            snapshot_dir=dirs[0],
            scratch_dir=dirs[1],
            runtime=runtime,
            toolchains=resolved,
        )
        assert (result.status, result.reason) == ("inconclusive", "toolchain_changed")
        assert "toolchain 'small'" in result.detail
        assert not marker.exists()

    def test_unresolved_toolchains_never_run(
        self, tree: Path, dirs: tuple[Path, Path], runtime: SandboxRuntime
    ) -> None:
        """A caller that does not pass the policy's resolved toolchains gets no run."""
        result = run_sandboxed(
            environment=os.environ,
            policy=_small_policy(tree),
            executable="python3",
            args=["-c", "print(1)"],
            snapshot_dir=dirs[0],
            scratch_dir=dirs[1],
            runtime=runtime,
        )
        assert (result.status, result.reason) == ("inconclusive", "toolchain_unavailable")


class TestSandboxDenialHint:
    def test_a_denied_read_is_hinted_and_no_evidence(
        self,
        sqlite_store: Store,
        tmp_path: Path,
        tree: Path,
        runtime: SandboxRuntime,
        write_policy: PolicyWriter,
    ) -> None:
        """A probe reading an ungranted path fails as it would; the failure is no evidence
        (``sandbox_denied``), and the receipt names the path and the fix."""
        (tmp_path / "repo").mkdir()
        (tmp_path / "repo" / "x.txt").write_text("x\n")
        snapshot = service.snapshot_capture(sqlite_store, tmp_path / "repo").snapshot_id
        write_policy(policy_entry())  # no toolchain: the tree is not granted
        target = tree / "lib" / "helper.py"
        plan = {
            "snapshot_id": snapshot,
            "policy_id": "python-tests",
            "executable": "python3",
            "args": ["-c", f"open('{target}')"],
            "oracle": {"check": {"kind": "exit_code", "equals": 0}, "source": "model_inferred"},
        }
        plan_id = service.probe_plan(sqlite_store, plan).plan_id
        result = service.probe_run(sqlite_store, plan_id, "python-tests", runtime=runtime)
        assert (result.outcome, result.reason) == ("inconclusive", "sandbox_denied")
        hint = result.receipt.operational.to_json()["possible_sandbox_denial"]
        assert hint["reads"] == [str(target)]
        assert "possible_sandbox_denial" not in result.receipt.committed.to_json()
        (refused,) = result.receipt.committed.to_json()["refusals"]
        assert (refused["operation"], refused["target"]) == ("read", str(target))
        shown = io.StringIO()
        print_receipt(
            Console(file=shown, width=300, force_terminal=True, color_system=None),
            result.receipt,
            "run",
        )
        assert (
            f"possible_sandbox_denial │ outside the policy's grants: {target}" in shown.getvalue()
        )
        assert f"refused                 │ read {target}: {target} is not visible" in (
            shown.getvalue()
        )


class TestPreflightRules:
    def test_a_preflight_executable_the_policy_does_not_allow_never_runs(
        self, tree: Path, dirs: tuple[Path, Path], runtime: SandboxRuntime
    ) -> None:
        """Preflight commands obey the policy's allowlist: nothing runs, the reason says why."""
        policy = _small_policy(tree)
        marker = dirs[1] / "ran"
        result = run_sandboxed(
            environment=os.environ,
            policy=policy,
            executable="python3",
            args=["-c", f"open('{marker}', 'w')"],
            snapshot_dir=dirs[0],
            scratch_dir=dirs[1],
            runtime=runtime,
            toolchains=resolve_toolchains(policy),
            preflight=[["perl", "-e", "1"]],
        )
        assert (result.status, result.reason) == ("inconclusive", "executable_not_allowed")
        assert "'perl'" in result.detail
        assert not marker.exists()

    def test_preflight_shares_the_probes_disposable_scratch(
        self, tree: Path, dirs: tuple[Path, Path], runtime: SandboxRuntime
    ) -> None:
        """What a preflight writes to scratch, the probe reads: the same disposable tree."""
        policy = _small_policy(tree)
        setup = "import os; open(os.environ['BYTE_PROBE_SCRATCH'] + '/prepared', 'w').write('ok')"
        probe = "import os; print(open(os.environ['BYTE_PROBE_SCRATCH'] + '/prepared').read())"
        result = run_sandboxed(
            environment=os.environ,
            policy=policy,
            executable="python3",
            args=["-c", probe],
            snapshot_dir=dirs[0],
            scratch_dir=dirs[1],
            runtime=runtime,
            toolchains=resolve_toolchains(policy),
            preflight=[["python3", "-c", setup]],
        )
        assert (result.status, result.exit_code, result.stdout) == ("ok", 0, b"ok\n")
        assert [p.exit_code for p in result.preflight] == [0]
