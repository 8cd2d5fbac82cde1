"""CLI output for CI logs: plain tables off a terminal, no collapsed column on a narrow
one, progress lines by an injected clock, and a closed pipe that never changes the exit
code (docs/ARCHITECTURE.md, "CLI output")."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import pytest
from rich.console import Console
from rich.table import Table
from rich.text import Text

import probe_service.cli.queue as queue_cli
from probe_service.cli import main
from probe_service.cli.pipes import PipeSafeStream
from probe_service.cli.progress import ProgressLines, summary_line
from probe_service.cli.tables import plain_lines, print_table
from probe_service.service.adapters import RunSummary

from ..stubsandbox import Canned, StubSandbox
from .conftest import POLICY_ID, CliRunner, PlanCreator


def _results() -> list[RunSummary]:
    outcomes = ("supports", "refutes", "inconclusive")
    return [
        RunSummary("a" * 32, i, "p" * 64, f"plan {i} holds", "done", o, "oracle_passed", "b" * 64)
        for i, o in enumerate(outcomes, start=1)
    ]


class TestTables:
    def test_wide_results_at_80_terminal_columns_keep_the_outcome(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """`submit --wide` on an 80-column terminal: every outcome is printed whole (the
        ids fold instead of squeezing the outcome column to nothing)."""
        terminal = Console(width=80, force_terminal=True, record=True)
        monkeypatch.setattr(queue_cli, "console", terminal)
        queue_cli._print_results(_results(), wide=True)
        shown = terminal.export_text()
        for outcome in ("supports", "refutes", "inconclusive"):
            assert f" {outcome} " in shown
        assert max(len(line) for line in shown.splitlines()) <= 80

    def test_off_a_terminal_a_table_is_plain_aligned_lines(self) -> None:
        """Not a terminal: title, header and rows as lines, columns aligned, no box
        drawing, nothing wrapped however wide, hostile text on one line."""
        table = Table(title="t")
        for column in ("a", "outcome"):
            table.add_column(column)
        table.add_row("x" * 300, "supports")
        table.add_row(Text("line\nbreak\x1b[31m"), "inconclusive")
        assert plain_lines(table) == [
            "t",
            "a" + " " * 301 + "outcome",
            "x" * 300 + "  supports",
            "line\\nbreak\\x1b[31m".ljust(300) + "  inconclusive",
        ]
        out = io.StringIO()
        print_table(Console(file=out, width=80), table)
        assert out.getvalue().splitlines() == plain_lines(table)

    @pytest.mark.sandbox
    def test_demo_off_a_terminal_is_plain_too(self, real_cli: CliRunner, tmp_path: Path) -> None:
        """`demo` into a pipe prints its receipts table as plain aligned lines, no box
        drawing: one line per probe with its outcome, as every other table."""
        code, out, err = real_cli("demo", "--workdir", str(tmp_path / "demo"), root=False)
        assert code == 0, err
        assert not [c for c in out if "\u2500" <= c <= "\u257f"], out
        lines = out.splitlines()
        assert "probe receipts" in lines
        header = lines[lines.index("probe receipts") + 1]
        assert header.split() == ["hypothesis", "oracle", "outcome", "reason", "exit", "receipt"]
        at = header.index("outcome")
        rows = lines[lines.index("probe receipts") + 2 :]
        assert [row[at:].split()[0] for row in rows] == ["supports", "refutes", "inconclusive"]


class TestProgressLines:
    def test_one_line_per_interval_of_the_clock(self) -> None:
        """A line once every_s passed since the last, never more than one per poll."""
        now = [0.0]
        out = io.StringIO()
        lines = ProgressLines("batch b", 3, 10, out, lambda: now[0])
        for t in (1, 9.9, 10, 12, 19.9, 35):
            now[0] = t
            lines({"queued": 2, "running": 1, "done": 0})
        written = out.getvalue().splitlines()
        assert [w.rsplit(", ", 1)[1] for w in written] == ["10s", "35s"]
        assert written[0] == (
            "byte-probe: batch b: 0/3 done (0 supports, 0 refutes, 0 inconclusive), "
            "1 running, 2 queued, 10s"
        )

    def test_zero_means_no_lines(self) -> None:
        """--progress-every 0 writes nothing, however much time passes."""
        now = [0.0]
        out = io.StringIO()
        lines = ProgressLines("batch b", 1, 0, out, lambda: now[0])
        now[0] = 1e6
        lines({"queued": 1})
        assert out.getvalue() == ""

    def test_the_summary_counts_outcomes_unfinished_and_reused(self) -> None:
        """The summary line names every outcome's count, unfinished, reused and the gate."""
        results = [*_results(), RunSummary("c" * 32, 4, "p" * 64, "q", "queued", None, None, None)]
        assert summary_line("batch b", results, 61.4, True) == (
            "byte-probe: batch b: 4 runs: 1 supports, 1 refutes, 1 inconclusive, "
            "1 unfinished, 0 reused; 61s; gate fail\n"
        )


class _ClosedPipe(io.TextIOBase):
    """A stdout whose reader has gone: every write raises EPIPE (its descriptor is one
    of /dev/null, for what asks for one)."""

    def __init__(self, devnull: int) -> None:
        self._fd = devnull

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self._fd


class TestBrokenPipe:
    @pytest.mark.parametrize(
        ("canned", "refutes", "code"),
        [(Canned(), False, 0), (Canned(exit_code=4), True, 1), (Canned(exit_code=4), False, 2)],
        ids=["supports", "refutes", "inconclusive"],
    )
    def test_run_into_a_closed_pipe_exits_with_the_outcomes_code(
        self,
        created: PlanCreator,
        stub: StubSandbox,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
        canned: Canned,
        refutes: bool,
        code: int,
    ) -> None:
        """`run … | head -1`: stdout's reader gone, the exit code is still the outcome's
        (0, 1, 2), and nothing is said about the pipe."""
        stub.answer = lambda _plan: canned
        plan_id = created("raise SystemExit(4)", failure_refutes=refutes)
        capsys.readouterr()
        devnull = os.open(os.devnull, os.O_WRONLY)
        monkeypatch.setattr(sys, "stdout", _ClosedPipe(devnull))
        argv = ["run", plan_id, "--policy", POLICY_ID, "--root", str(tmp_path / "state")]
        try:
            assert main(argv, backend=stub) == code
        finally:
            monkeypatch.undo()
            os.close(devnull)
        assert capsys.readouterr().err == ""

    def test_the_stream_drops_writes_after_the_reader_left(self) -> None:
        """After the first EPIPE every write and flush succeeds and is dropped."""
        devnull = os.open(os.devnull, os.O_WRONLY)
        safe = PipeSafeStream(_ClosedPipe(devnull))  # type: ignore[arg-type]
        assert safe.write("x") == 1
        os.close(devnull)
        assert safe.broken
        safe.flush()
        assert safe.write("more") == 4


JUNIT = {
    "check": {"kind": "junit_xml", "path": "report.xml"},
    "source": "historical_regression",
    "reference": "issue #29",
}


def _report(cases: int) -> bytes:
    body = b"".join(
        b"<testcase classname='m' name='t%d'>%s</testcase>"
        % (i, b"<failure message='boom %d'/>" % i if i % 3 == 0 else b"")
        for i in range(cases)
    )
    return b"<testsuite>" + body + b"</testsuite>"


def _cap_cases(environment: Path, cap: int) -> None:
    """The CLI tests' policy as schema 3, with junit_max_cases."""
    doc = json.loads(environment.read_text())
    doc["schema"] = 3
    doc["policies"][0]["junit_max_cases"] = cap
    environment.write_text(json.dumps(doc))


class TestJunitOnTheCommandLine:
    def test_a_report_over_the_cap_shows_the_cap_and_the_size_in_run_and_show(
        self,
        cli: CliRunner,
        created: PlanCreator,
        stub: StubSandbox,
        environment: Path,
    ) -> None:
        """A report over the policy's junit_max_cases: `run` and `receipt show` end
        inconclusive and print the detail naming the cap and the report's size."""
        _cap_cases(environment, 10)
        stub.answer = lambda _plan: Canned(scratch_files={"report.xml": _report(12)})
        plan_id = created("pass", oracle=JUNIT)
        said = "the report holds 12 test cases, over the policy's junit_max_cases cap of 10"
        code, out, _ = cli("run", plan_id, "--policy", POLICY_ID)
        assert code == 2
        assert said in out
        receipt = next(line.split()[-1] for line in out.splitlines() if line.startswith("receipt"))
        code, out, _ = cli("receipt", "show", receipt)
        assert (code, said in out) == (0, True)

    def test_a_version_2_receipt_verifies_its_case_list_with_root(
        self, cli: CliRunner, created: PlanCreator, stub: StubSandbox, tmp_path: Path
    ) -> None:
        """`receipt verify` of a version-2 JUnit receipt checks the commitment offline and
        says the case list was not checked; with --root it checks the stored list too.
        `run` lists the failing tests."""
        stub.answer = lambda _plan: Canned(scratch_files={"report.xml": _report(30)})
        code, out, _ = cli("run", created("pass", oracle=JUNIT), "--policy", POLICY_ID, "--json")
        doc = json.loads(out)
        assert doc["junit"]["failed"] == 10
        assert doc["junit"]["not_passed"][0] == {
            "id": "m::t0",
            "outcome": "failed",
            "message": "boom 0",
        }
        code, out, _ = cli("receipt", "show", doc["receipt_sha256"], "--json")
        path = tmp_path / "receipt.json"
        path.write_text(out)
        code, out, _ = cli("receipt", "verify", str(path), root=False)
        assert (code, "case list not checked" in out) == (0, True)
        code, out, _ = cli("receipt", "verify", str(path))
        assert (code, "case list checked against its digest" in out) == (0, True)
