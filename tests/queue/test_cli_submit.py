"""`byte-probe submit`, in process: the embedded mode (one batch with the real sandbox, the
gate, reuse and the JUnit report over the stub sandbox's canned runs), and refusals."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import pytest
from sqlalchemy import func, select

from probe_service.cli import main
from probe_service.queue import REDIS_URL_ENV, ProbeQueue
from probe_service.queue.broker import NAMESPACE_ENV
from probe_service.queue.tables import runs
from probe_service.snapshot import snapshot_capture
from probe_service.store import DATABASE_URL_ENV, Store, open_store

from ..conftest import seed_state
from ..stubsandbox import Canned, StubSandbox, by_last_arg
from .conftest import POLICY_ID, shell_plan

CliRunner = Callable[..., tuple[int, str, str]]


def _runner(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, backend: StubSandbox | None
) -> CliRunner:
    def run(*args: str) -> tuple[int, str, str]:
        code = main([*args, "--root", str(tmp_path / "state")], backend=backend)
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def stub() -> StubSandbox:
    """The stub sandbox, answering as the plans' shell scripts would (never running them)."""
    noisy = Canned(
        stdout=b"out [b]\x1b[31m\x01\n", stderr="".join(f"e{i}\n" for i in range(1, 301)).encode()
    )
    answers = {"exit 1": Canned(exit_code=1), "exit 3": Canned(exit_code=3), NOISY: noisy}
    answers["exit 4"] = Canned(exit_code=4)
    return StubSandbox(by_last_arg(answers))


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], tmp_path: Path, stub: StubSandbox) -> CliRunner:
    """Run `byte-probe ARGS --root <tmp>/state` in process, its runs answered by the stub
    sandbox; return (code, stdout, stderr)."""
    return _runner(capsys, tmp_path, stub)


@pytest.fixture
def real_cli(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> CliRunner:
    """Like ``cli``, its runs in the real sandbox."""
    return _runner(capsys, tmp_path, None)


#: A script printing escapes and 300 lines of stderr (the stub answers its output).
NOISY = "printf 'out [b]\\033[31m\\001\\n'; for i in $(seq 300); do echo e$i >&2; done"


@pytest.fixture
def embedded_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, policy_file: Path, migrated_sqlite_file: Path
) -> Iterator[str]:
    """No Redis and no database URL: a snapshot captured into the embedded store."""
    monkeypatch.delenv(REDIS_URL_ENV, raising=False)
    monkeypatch.delenv(DATABASE_URL_ENV, raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    src = tmp_path / "src"
    src.mkdir()
    (src / "hello.txt").write_text("hello\n")
    store = open_store(seed_state(tmp_path / "state", migrated_sqlite_file))
    yield snapshot_capture(store, src).snapshot_id
    store.close()


def _plans_file(tmp_path: Path, plans: list[Any], extra: str = "") -> str:
    path = tmp_path / "plans.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in plans) + extra)
    return str(path)


class TestEmbeddedSubmit:
    def test_all_supports_exits_zero(
        self, real_cli: CliRunner, embedded_snapshot: str, tmp_path: Path
    ) -> None:
        """Without PROBE_REDIS_URL the probes run in this process, in the real sandbox, and
        a passing batch exits 0."""
        path = _plans_file(tmp_path, [shell_plan(embedded_snapshot, "exit 0", "passes")])
        code, out, _ = real_cli("submit", path, "--policy", POLICY_ID, "--json")
        report = json.loads(out)
        assert code == 0
        assert (report["counts"]["supports"], report["gate"]) == (1, "pass")

    def test_one_refutes_fails_the_default_gate(
        self, cli: CliRunner, embedded_snapshot: str, tmp_path: Path
    ) -> None:
        """Under --fail-on any a refuted plan makes the batch exit 1."""
        plan = {**shell_plan(embedded_snapshot, "exit 1", "fails"), "failure_refutes": True}
        path = _plans_file(tmp_path, [plan])
        code, out, _ = cli("submit", path, "--policy", POLICY_ID, "--json")
        assert code == 1
        assert json.loads(out)["counts"]["refutes"] == 1

    def test_fail_on_refutes_passes_an_inconclusive_batch(
        self, cli: CliRunner, embedded_snapshot: str, tmp_path: Path, stub: StubSandbox
    ) -> None:
        """--fail-on refutes lets a batch with only inconclusive runs exit 0."""
        stub.answer = lambda _plan: Canned(
            status="inconclusive", reason="executable_not_allowed", launched=False
        )
        plan = {**shell_plan(embedded_snapshot, "", "not allowed"), "executable": "ls", "args": []}
        path = _plans_file(tmp_path, [plan])
        code, out, _ = cli("submit", path, "--policy", POLICY_ID, "--fail-on", "refutes", "--json")
        report = json.loads(out)
        assert report["counts"]["inconclusive"] == 1
        assert code == 0


@pytest.fixture
def farm_env(
    monkeypatch: pytest.MonkeyPatch,
    pg_url: str,
    redis_url: str,
    redis_namespace: str,
    shared_store: Store,
) -> Iterator[ProbeQueue]:
    """PROBE_REDIS_URL and PROBE_DATABASE_URL set, as on a CI farm; the queue to inspect."""
    monkeypatch.setenv(REDIS_URL_ENV, redis_url)
    monkeypatch.setenv(NAMESPACE_ENV, redis_namespace)
    monkeypatch.setenv(DATABASE_URL_ENV, pg_url)
    monkeypatch.setenv("COLUMNS", "200")
    queue = ProbeQueue(redis_url, namespace=redis_namespace)
    yield queue
    queue.close()


def _stored_runs(store: Store) -> int:
    with store.reading() as conn:
        return int(conn.execute(select(func.count()).select_from(runs)).scalar_one())


class TestSubmitRefusals:
    def test_invalid_line_exits_3_naming_it_and_sends_nothing(
        self,
        cli: CliRunner,
        farm_env: ProbeQueue,
        shared_store: Store,
        snapshot_id: str,
        tmp_path: Path,
    ) -> None:
        """A file with a bad line exits 3, names the line, and stores and sends nothing."""
        path = _plans_file(tmp_path, [shell_plan(snapshot_id, "exit 0", "ok")], "oops\n")
        (tmp_path / "state").mkdir()
        code, _, err = cli("submit", path, "--policy", POLICY_ID)
        assert code == 3
        assert "line 2:" in err
        assert (_stored_runs(shared_store), farm_env.depth()) == (0, 0)

    def test_skip_invalid_submits_the_valid_lines(
        self,
        cli: CliRunner,
        farm_env: ProbeQueue,
        shared_store: Store,
        snapshot_id: str,
        tmp_path: Path,
    ) -> None:
        """With --skip-invalid the valid plans are stored and enqueued, the bad line reported."""
        path = _plans_file(tmp_path, [shell_plan(snapshot_id, "exit 0", "ok")], "oops\n")
        (tmp_path / "state").mkdir()
        code, out, err = cli("submit", path, "--policy", POLICY_ID, "--skip-invalid", "--json")
        assert code == 0
        assert json.loads(out)["enqueued"] == 1
        assert "skipped line 2:" in err
        assert (_stored_runs(shared_store), farm_env.depth()) == (1, 1)


class TestSubmitReuse:
    def test_repeated_batch_is_reused_unless_no_reuse(
        self, cli: CliRunner, embedded_snapshot: str, tmp_path: Path
    ) -> None:
        """A second submit of the same plan serves its receipt, shown as reused in the JSON
        and the JUnit; --no-reuse executes it again."""
        path = _plans_file(tmp_path, [shell_plan(embedded_snapshot, "exit 0", "again")])
        first = json.loads(cli("submit", path, "--policy", POLICY_ID, "--json")[1])
        junit = tmp_path / "probes.xml"
        second = json.loads(
            cli("submit", path, "--policy", POLICY_ID, "--json", "--junit", str(junit))[1]
        )
        fresh = json.loads(cli("submit", path, "--policy", POLICY_ID, "--json", "--no-reuse")[1])
        reused = [r["results"][0]["reused"] for r in (first, second, fresh)]
        assert (reused, second["reused"]) == ([False, True, False], 1)
        receipts = [r["results"][0]["receipt_sha256"] for r in (first, second, fresh)]
        assert receipts[0] == receipts[1] != receipts[2]
        xml = junit.read_text()
        assert '<property name="reused" value="1" />' in xml
        assert "(reused)" in xml


JUNIT_XSD = Path(__file__).resolve().parent.parent / "fixtures" / "junit-10.xsd"


class TestJunitReport:
    @pytest.fixture
    def report(self, cli: CliRunner, embedded_snapshot: str, tmp_path: Path) -> Path:
        """A JUnit file of one supporting, one refuted and one inconclusive run."""
        refuted = {**shell_plan(embedded_snapshot, "exit 3", "refuted"), "failure_refutes": True}
        plans = [
            shell_plan(embedded_snapshot, NOISY, "noisy"),
            refuted,
            shell_plan(embedded_snapshot, "exit 4", "inconclusive"),
        ]
        junit = tmp_path / "probes.xml"
        code, _, err = cli(
            "submit", _plans_file(tmp_path, plans), "--policy", POLICY_ID, "--junit", str(junit)
        )
        assert code == 1, err
        return junit

    def test_validates_against_junit_xsd(self, report: Path) -> None:
        """The report validates against the Jenkins junit-10.xsd shape CI systems read."""
        xmlschema = pytest.importorskip("xmlschema")
        xmlschema.XMLSchema(str(JUNIT_XSD)).validate(str(report))

    def test_cases_carry_time_output_and_reason(self, report: Path) -> None:
        """Each case has a time and bounded, neutralised output; the reason is the message."""
        root = ET.parse(report).getroot()  # noqa: S314 - our own file
        cases = root.findall("testsuite/testcase")
        assert all(float(case.get("time", "x")) >= 0 for case in cases)
        out, err = cases[0].findtext("system-out", ""), cases[0].findtext("system-err", "")
        assert "out [b]\\x1b[31m\\x01" in out
        assert ("e1\n" in err, "e300\n" in err, "200 of 300 lines cut" in err) == (True,) * 3
        failure, error = cases[1].find("failure"), cases[2].find("error")
        assert failure is not None
        assert error is not None
        assert failure.get("message", "").startswith("oracle_failed")
        assert "receipt" in error.get("message", "")
        assert root.findall("testsuite/testcase/properties") == []
        assert root.findall("testsuite/properties/property")


@pytest.mark.usefixtures("farm_env")
class TestNoSilentWaits:
    @pytest.fixture
    def farm(self, shared_store: Store, snapshot_id: str, tmp_path: Path) -> tuple[Store, str]:
        """The shared store and a snapshot in it; the CLI's state directory exists."""
        (tmp_path / "state").mkdir()
        return shared_store, snapshot_id

    def test_submit_wait_says_no_worker_and_stops_at_timeout(
        self, cli: CliRunner, farm: tuple[Store, str], tmp_path: Path
    ) -> None:
        """With no worker, `submit --wait` says so on stderr (not a terminal) and exits 4 at
        its timeout naming the resume command; `cancel` then closes the queued run."""
        shared_store, snapshot_id = farm
        path = _plans_file(tmp_path, [shell_plan(snapshot_id, "exit 0", "ok")])
        args = ("--wait", "--timeout", "1", "--notice-after", "0", "--json")
        code, out, err = cli("submit", path, "--policy", POLICY_ID, *args)
        assert code == 4
        assert "no worker has taken any run of batch" in err
        assert "--resume" in err
        run_id = json.loads(out)["results"][0]["run_id"]
        code, out, err = cli("cancel", run_id[:8], "--json")
        assert code == 0, err
        assert json.loads(out) == {"run_id": run_id, "cancelled": True}
        with shared_store.reading() as conn:
            row = conn.execute(select(runs).where(runs.c.run_id == run_id)).one()
        assert (row.state, row.outcome, row.reason) == ("done", "inconclusive", "cancelled")
        code, _, err = cli("cancel", run_id)
        assert code == 3
        assert "only a queued run can be cancelled" in err

    def test_queued_run_timeout_cancels_the_run(
        self, cli: CliRunner, farm: tuple[Store, str], tmp_path: Path
    ) -> None:
        """A queued `run` no worker took says so, exits 4 at its timeout, and is cancelled,
        so a worker arriving later never executes it."""
        shared_store, snapshot_id = farm
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps(shell_plan(snapshot_id, "exit 0", "late")))
        code, out, err = cli("plan", "create", str(plan), "--json")
        assert code == 0, err
        plan_id = json.loads(out)["plan_id"]
        code, _, err = cli(
            "run", plan_id, "--policy", POLICY_ID, "--timeout", "1", "--notice-after", "0"
        )
        assert code == 4
        assert "no worker has taken any run of plan" in err
        assert "so it was cancelled" in err
        with shared_store.reading() as conn:
            states = conn.execute(select(runs.c.state, runs.c.reason)).all()
        assert [tuple(s) for s in states] == [("done", "cancelled")]


def _second_policy(policy_file: Path, policy_id: str) -> None:
    """Add a second policy (a copy of the first under ``policy_id``) to the file."""
    doc = json.loads(policy_file.read_text())
    doc["policies"].append({**doc["policies"][0], "id": policy_id})
    policy_file.write_text(json.dumps(doc))


class TestPolicyPerLine:
    def test_each_line_runs_under_its_own_plans_policy(
        self,
        cli: CliRunner,
        embedded_snapshot: str,
        policy_file: Path,
        tmp_path: Path,
    ) -> None:
        """Without --policy, two lines naming two known policies each run under their own."""
        _second_policy(policy_file, "ci-other")
        first = shell_plan(embedded_snapshot, "exit 0", "first")
        second = {**shell_plan(embedded_snapshot, "exit 0", "second"), "policy_id": "ci-other"}
        code, out, err = cli("submit", _plans_file(tmp_path, [first, second]), "--json")
        assert code == 0, err
        results = json.loads(out)["results"]
        assert [r["policy_id"] for r in results] == [POLICY_ID, "ci-other"]
        assert [r["outcome"] for r in results] == ["supports", "supports"]

    def test_a_file_mixing_known_and_unknown_policies_is_refused_naming_the_line(
        self,
        cli: CliRunner,
        farm_env: ProbeQueue,
        shared_store: Store,
        snapshot_id: str,
        policy_file: Path,
        tmp_path: Path,
    ) -> None:
        """Line 3 names a policy the policy file lacks: the file is refused naming line 3
        and the policy id, before anything is stored or sent -- even with --skip-invalid."""
        known = shell_plan(snapshot_id, "exit 0", "known")
        unknown = {**shell_plan(snapshot_id, "exit 0", "unknown"), "policy_id": "nope"}
        path = _plans_file(tmp_path, [known, known | {"hypothesis": "again"}, unknown])
        (tmp_path / "state").mkdir()
        for extra in ((), ("--skip-invalid",)):
            code, _, err = cli("submit", path, *extra)
            assert code == 3
            assert "line 3: policy_id 'nope' is not a policy of the policy file" in err
            assert (_stored_runs(shared_store), farm_env.depth()) == (0, 0)


class TestCiLog:
    def test_progress_lines_by_the_clock_then_a_summary_line(
        self,
        cli: CliRunner,
        farm_env: ProbeQueue,
        snapshot_id: str,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """Off a terminal, a waiting submit writes a progress line once --progress-every
        seconds of its clock passed (a clock stepping 10s a reading here: no real wait),
        and ends with one summary line of counts after the table."""
        ticks = iter(range(0, 10_000, 10))
        monkeypatch.setattr("probe_service.cli.queue.progress_clock", lambda: float(next(ticks)))
        path = _plans_file(tmp_path, [shell_plan(snapshot_id, "exit 0", "ok")])
        (tmp_path / "state").mkdir()
        args = ("--wait", "--timeout", "0", "--progress-every", "10", "--notice-after", "999")
        code, out, _ = cli("submit", path, *args)
        assert code == 4  # nothing took the run before the timeout
        lines = out.splitlines()
        progress = [line for line in lines if line.startswith("byte-probe: batch")]
        assert progress[0].endswith(
            ": 0/1 done (0 supports, 0 refutes, 0 inconclusive), 0 running, 1 queued, 10s"
        )
        assert progress[-1].endswith(
            ": 1 runs: 0 supports, 0 refutes, 0 inconclusive, 1 unfinished, 0 reused; 20s; "
            "gate fail"
        )
        assert lines[-1] == progress[-1]
        assert len(progress) == 2

    def test_no_progress_line_before_the_interval(
        self,
        cli: CliRunner,
        farm_env: ProbeQueue,
        snapshot_id: str,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """With a clock that never moves, no progress line is written; the summary is."""
        monkeypatch.setattr("probe_service.cli.queue.progress_clock", lambda: 5.0)
        path = _plans_file(tmp_path, [shell_plan(snapshot_id, "exit 0", "ok")])
        (tmp_path / "state").mkdir()
        code, out, err = cli("submit", path, "--wait", "--timeout", "0", "--json")
        assert code == 4
        assert "0/1 done" not in out + err
        assert err.splitlines()[-1].endswith("1 unfinished, 0 reused; 0s; gate fail")
        assert json.loads(out)["batch_id"]  # stdout stays one JSON document

    def test_results_print_plain_off_a_terminal_wide_ids_whole(
        self, cli: CliRunner, embedded_snapshot: str, tmp_path: Path
    ) -> None:
        """Not a terminal: the table is plain lines, --wide ids whole and the outcome
        column intact (no box drawing, nothing folded)."""
        path = _plans_file(tmp_path, [shell_plan(embedded_snapshot, "exit 0", "ok")])
        code, out, _ = cli("submit", path, "--policy", POLICY_ID, "--wide")
        assert code == 0
        assert "┃" not in out
        row = next(line for line in out.splitlines() if " supports " in line)
        fields = row.split()
        assert fields[2:4] == ["supports", "oracle_passed"]
        assert (len(fields[4]), len(fields[-1])) == (64, 32)  # receipt and run id, whole
