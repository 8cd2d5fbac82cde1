"""Fast start: command groups load when they run; `capabilities` and `schema` print the table.

Nothing here measures time (benchmarks/cli_start_bench.py does): the tests check what is
imported, which is what the start-up time follows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from probe_service.cli.main import COMMANDS, load_command
from probe_service.cli.reference import cache_path
from probe_service.service import operations

from .conftest import CliRunner, PlanCreator

HEAVY = ("sqlalchemy", "alembic", "dramatiq", "redis", "psycopg", "cryptography")
#: The parts a command that only reads the store never needs (docs/ARCHITECTURE.md,
#: "Start-up"): the sandbox and the run, the claims engine, the broker, every other row.
NOT_FOR_READS = (
    "alembic",
    "cryptography",
    "dramatiq",
    "redis",
    "probe_service.sandbox.runner",
    "probe_service.plans.run",
    "probe_service.claims.analysis",
    "probe_service.claims.models",
    "probe_service.queue.submit",
    "probe_service.snapshot.capture",
    "probe_service.service.rows.claims",
    "probe_service.service.rows.meta",
)

_PROBE = """
import json, sys
from probe_service.cli import main
code = main(sys.argv[1:])
heavy = sorted(m for m in json.loads(sys.stdin.read()) if m in sys.modules)
sys.stderr.write("LOADED " + json.dumps({"code": code, "heavy": heavy}) + "\\n")
"""


def _loaded(
    tmp_path: Path, *args: str, watch: tuple[str, ...] = HEAVY
) -> tuple[dict[str, object], str]:
    """Run the CLI in a fresh interpreter; return its code and which of ``watch`` it loaded."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args],
        input=json.dumps(watch),
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    line = next(x for x in done.stderr.splitlines() if x.startswith("LOADED "))
    report: dict[str, object] = json.loads(line.removeprefix("LOADED "))
    return report, done.stdout


class TestLazyCommands:
    @pytest.mark.parametrize("name", list(COMMANDS))
    def test_summary_matches_the_command(self, name: str) -> None:
        """The summary `--help` shows without importing a command is its help's first part."""
        help_text = " ".join((load_command(name).help or "").split("\n\n")[0].split())
        assert help_text == COMMANDS[name].summary

    def test_help_imports_no_heavy_module(self, tmp_path: Path) -> None:
        """`byte-probe --help` lists every command and loads no store, queue or crypto."""
        report, out = _loaded(tmp_path, "--help")
        assert report == {"code": 0, "heavy": []}
        assert all(f"  {name} " in out for name in COMMANDS)

    def test_cached_capabilities_imports_no_heavy_module(self, tmp_path: Path) -> None:
        """A second `capabilities` is served from the cache without importing the parts."""
        first, out = _loaded(tmp_path, "capabilities")
        assert first["code"] == 0
        second, again = _loaded(tmp_path, "capabilities")
        assert second == {"code": 0, "heavy": []}
        assert json.loads(again) == json.loads(out)
        assert not (tmp_path / ".zyte").exists()  # no store was opened for it

    def test_store_read_skips_alembic(
        self, tmp_path: Path, cli: CliRunner, created: PlanCreator
    ) -> None:
        """`plan show` on a store already at head does not import Alembic."""
        plan_id = created("print(1)")
        report, out = _loaded(tmp_path, "plan", "show", plan_id, "--json", "--root", "state")
        assert report["code"] == 0
        assert "alembic" not in report["heavy"]  # type: ignore[operator]
        assert json.loads(out)["plan_id"] == plan_id

    def test_store_reads_import_only_their_rows(
        self, tmp_path: Path, cli: CliRunner, created: PlanCreator
    ) -> None:
        """`plan show`, `receipt show`-style reads and `events` load the store and their own
        row, never the sandbox, the claims engine, the broker or the other rows."""
        plan_id = created("print(1)")
        for args in (
            ("plan", "show", plan_id[:12], "--root", "state"),
            ("plan", "show", plan_id, "--json", "--root", "state"),
            ("events", "--json", "--root", "state"),
        ):
            report, out = _loaded(tmp_path, *args, watch=NOT_FOR_READS)
            assert report == {"code": 0, "heavy": []}, args
            assert out


class TestCapabilitiesCommand:
    def test_prints_the_tables_capabilities(self, cli: CliRunner) -> None:
        """Every operation the CLI face offers, with schemas, sandbox readiness and versions."""
        code, out, _ = cli("capabilities", "--fresh", root=False)
        assert code == 0
        document = json.loads(out)
        assert [op["name"] for op in document["operations"]] == [
            op.name for op in operations("cli")
        ]
        assert document["interface"] == "cli"
        assert {"store", "receipt", "policy_file"} <= set(document["schema_versions"])
        assert "ready" in document["sandbox"]

    def test_a_cache_others_could_write_is_ignored(
        self, cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A group-writable cache file is never trusted: the document is rebuilt."""
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
        assert cli("capabilities", root=False)[0] == 0
        path = cache_path()
        path.write_text(json.dumps({"operations": [], "forged": True}))
        path.chmod(0o666)
        code, out, _ = cli("capabilities", root=False)
        assert code == 0
        assert "forged" not in json.loads(out)
        assert json.loads(out)["operations"]


class TestSchemaCommand:
    def test_one_operation_as_json(self, cli: CliRunner) -> None:
        """`schema probe_run --json` prints its request and response schemas."""
        code, out, _ = cli("schema", "probe_run", "--json", root=False)
        assert code == 0
        schemas = json.loads(out)
        assert set(schemas) == {"request", "response"}
        assert "policy_id" in schemas["request"]["properties"]
        assert "policy" not in schemas["request"]["properties"]

    def test_every_operation_listed(self, cli: CliRunner) -> None:
        """Without an operation: every CLI operation with its request fields."""
        code, out, _ = cli("schema", root=False)
        assert code == 0
        for op in operations("cli"):
            assert f"{op.name} (" in out

    def test_unknown_operation_is_an_input_error(self, cli: CliRunner) -> None:
        """An unknown name is one stderr line naming it, exit 3."""
        code, _, err = cli("schema", "probe_destroy", root=False)
        assert code == 3
        assert err.count("\n") == 1
        assert "probe_destroy" in err


class TestNoStoreWithoutNeed:
    def test_policy_check_and_verify_create_no_state(
        self, cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Rows that need no store (policy_check, receipt_verify) open none in the cwd."""
        work = tmp_path / "work"
        work.mkdir()
        monkeypatch.chdir(work)
        assert cli("policy", "check", "--json", root=False)[0] == 0
        (work / "r.json").write_text(json.dumps({"committed": {}}))
        code, _, err = cli("receipt", "verify", str(work / "r.json"), root=False)
        assert code == 1, err
        assert list(work.iterdir()) == [work / "r.json"]


def test_cli_only_rows_stay_off_the_machine_faces() -> None:
    """Id prefixes, key creation and JSONL batches are for the CLI and Python API only."""
    cli_only = {"id_resolve", "key_create", "batch_submit", "batch_resume", "batch_wait"}
    for face in ("host", "mcp"):
        assert cli_only.isdisjoint(op.name for op in operations(face))
    assert cli_only <= {op.name for op in operations("cli")}
