"""Fixtures of the CLI tests: the CLI in process, a policy file, a snapshot and plans.

``cli`` runs probes through the stub sandbox (``tests/stubsandbox.py``), answering what the
test canned in ``stub``: the CLI's own behaviour (exit codes, output, ids, reuse) is what
those tests check. ``real_cli`` runs them in the real sandbox, for the tests about a run.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from probe_service.cli import main
from probe_service.policies import POLICY_FILE_ENV
from probe_service.store import DATABASE_URL_ENV

from ..conftest import seed_state
from ..stubsandbox import StubSandbox

POLICY_ID = "cli-python"

CliRunner = Callable[..., tuple[int, str, str]]


def _runner(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, backend: StubSandbox | None
) -> CliRunner:
    def _cli(*args: str, root: bool = True) -> tuple[int, str, str]:
        argv = [*args, "--root", str(tmp_path / "state")] if root else list(args)
        code = main(argv, backend=backend)
        out, err = capsys.readouterr()
        return code, out, err

    return _cli


@pytest.fixture
def stub(stub_sandbox: StubSandbox) -> StubSandbox:
    """The stub sandbox ``cli`` runs probes through; a test sets its ``answer``."""
    return stub_sandbox


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], tmp_path: Path, stub: StubSandbox) -> CliRunner:
    """Run `byte-probe ARGS --root <tmp>` in process, probes answered by the stub sandbox;
    return (exit code, stdout, stderr)."""
    return _runner(capsys, tmp_path, stub)


@pytest.fixture
def real_cli(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> CliRunner:
    """Like ``cli``, probes run in the real sandbox."""
    return _runner(capsys, tmp_path, None)


@pytest.fixture(autouse=True)
def environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, migrated_sqlite_file: Path
) -> Path:
    """The embedded store (empty, at the newest schema), a wide console, and an owner-only
    administrator policy file."""
    monkeypatch.delenv(DATABASE_URL_ENV, raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    seed_state(tmp_path / "state", migrated_sqlite_file)
    policy = tmp_path / "probe-policies.json"
    document = {
        "schema": 1,
        "policies": [
            {
                "id": POLICY_ID,
                "allowed_executables": ["python3"],
                "timeout_seconds": 20,
                "max_output_bytes": 100_000,
                "allowed_domains": [],
                "environment": ["LANG"],
            }
        ],
    }
    policy.write_text(json.dumps(document))
    policy.chmod(0o600)
    monkeypatch.setenv(POLICY_FILE_ENV, str(policy))
    return policy


@pytest.fixture
def snapshot_id(cli: CliRunner, repo: Path) -> str:
    """A snapshot of a one-file repository, captured through the CLI."""
    (repo / "data.txt").write_text("forty-two\n")
    code, out, _ = cli("snapshot", "capture", str(repo), "--json")
    assert code == 0
    return str(json.loads(out)["snapshot_id"])


PlanWriter = Callable[..., Path]


@pytest.fixture
def plan_file(tmp_path: Path, snapshot_id: str) -> PlanWriter:
    """Write a plan file running `python3 -c CODE`; return its path."""

    def _write(code: str, oracle: dict[str, Any], **extra: Any) -> Path:
        doc = {
            "snapshot_id": snapshot_id,
            "policy_id": POLICY_ID,
            "executable": "python3",
            "args": ["-c", code],
            "oracle": oracle,
            **extra,
        }
        path = tmp_path / f"plan-{len(list(tmp_path.glob('plan-*')))}.json"
        path.write_text(json.dumps(doc))
        return path

    return _write


def exit_oracle(source: str = "historical_regression") -> dict[str, Any]:
    oracle: dict[str, Any] = {"check": {"kind": "exit_code", "equals": 0}, "source": source}
    if source != "model_inferred":
        oracle["reference"] = "issue #7"
    return oracle


PlanCreator = Callable[..., str]


@pytest.fixture
def created(cli: CliRunner, plan_file: PlanWriter) -> PlanCreator:
    """Create a plan through the CLI; return its id."""

    def _create(code: str = "print('ok')", **kw: Any) -> str:
        oracle = kw.pop("oracle", exit_oracle())
        code_, out, err = cli("plan", "create", str(plan_file(code, oracle, **kw)), "--json")
        assert code_ == 0, err
        return str(json.loads(out)["plan_id"])

    return _create
