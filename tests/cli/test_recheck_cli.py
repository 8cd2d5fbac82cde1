"""The loop on the command line, with real sandboxed reruns: the gate fails naming the
statement and the exact command, that command rechecks, the gate passes
(docs/ARCHITECTURE.md, "Recheck" and "The gate report")."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from probe_service.policies import POLICY_FILE_ENV
from probe_service.sandbox import SandboxRuntime
from probe_service.service import ProbeService

from ..faces.drivers import PythonDriver
from ..rechecking import (
    BROKEN,
    EDITED,
    POLICY_ID,
    SCOPE,
    STATEMENT,
    capture,
    claim_doc,
    claim_on_receipt,
    ok,
    probe_plan,
    write_policy,
)
from .conftest import CliRunner

pytestmark = pytest.mark.sandbox


@pytest.fixture
def api(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runtime: SandboxRuntime
) -> Iterator[PythonDriver]:
    """The Python API over the CLI's store, with the recheck policy file for both."""
    monkeypatch.setenv(POLICY_FILE_ENV, str(write_policy(tmp_path / "recheck-policies.json")))
    with ProbeService.open(tmp_path / "state") as svc:
        yield PythonDriver(svc)


def _next_command(out: str) -> list[str]:
    (line,) = [x for x in out.splitlines() if x.startswith("  next: byte-probe recheck ")]
    argv = shlex.split(line.removeprefix("  next: "))
    assert argv[0] == "byte-probe"
    return argv[1:]


def test_gate_recheck_gate(api: PythonDriver, real_cli: CliRunner, tmp_path: Path) -> None:
    """The failing gate names the claim's statement, what moved and the command; running
    that command (it waits, with progress) resolves the obligation; the gate passes."""
    repo = tmp_path / "repo"
    claim_on_receipt(api, repo)
    after = capture(api, repo, EDITED)
    code, out, _ = real_cli("gate", "--snapshot", after, "--scope", SCOPE)
    assert code == 1
    assert STATEMENT in out
    assert "moved: dependencies[0] exact_blob src/parse.py: file:" in out
    argv = _next_command(out)
    assert argv[:5] == ["recheck", "--snapshot", after, "--scope", SCOPE]
    code, markdown, _ = real_cli(
        "gate", "--snapshot", after, "--scope", SCOPE, "--format", "markdown"
    )
    assert code == 1
    assert markdown.startswith("## ❌ byte-probe gate closed\n")
    assert f"```sh\nbyte-probe recheck --snapshot {after} --scope {SCOPE}" in markdown
    code, out, err = real_cli(*argv)
    assert code == 0, out + err
    assert "rechecked: " + STATEMENT in out
    assert "recheck: 1/1 rerun(s) done supports=1" in err
    code, out, _ = real_cli("gate", "--snapshot", after, "--scope", SCOPE)
    assert (code, out.splitlines()[0]) == (
        0,
        "gate passed: 1 claim(s) checked, 0 open obligation(s)",
    )


def test_a_refuting_rerun_exits_1_with_the_next_step(
    api: PythonDriver, real_cli: CliRunner, tmp_path: Path
) -> None:
    """A rerun that refutes the claim leaves it open: exit 1, naming the receipt and how
    to record the new outcome; --json carries the same report."""
    repo = tmp_path / "repo"
    claim_on_receipt(api, repo)
    broken = capture(api, repo, BROKEN)
    code, out, _ = real_cli("recheck", "--snapshot", broken, "--scope", SCOPE, "--json")
    assert code == 1, out
    report = json.loads(out)
    (entry,) = report["entries"]
    assert (entry["status"], entry["reruns"][0]["outcome"]) == ("disagreed", "refutes")
    code, out, _ = real_cli("recheck", "--snapshot", broken, "--scope", SCOPE)
    # The obligation is still open: a second recheck reruns it (the receipt is reused).
    assert code == 1
    assert "still open: a rerun disagreed: " + STATEMENT in out
    assert "refutes while the claim is supported: record the new outcome" in out


def test_refusals_are_one_line_and_exit_3(
    api: PythonDriver, cli: CliRunner, tmp_path: Path
) -> None:
    """Naming an obligation whose claim has nothing to rerun is refused in one stderr
    line, exit 3."""
    repo = tmp_path / "repo"
    before = capture(api, repo, "def parse(text):\n    return text.split(',')\n")
    span = {"span": {"path": "src/parse.py", "start": 0, "end": 10}}
    ok(api.call("claim_create", {"claim": claim_doc(before, [span])}))
    after = capture(api, repo, EDITED)
    assert cli("gate", "--snapshot", after)[0] == 1
    (obligation,) = ok(api.call("obligation_list", {"state": "open"}))["obligations"]
    code, out, err = cli(
        "recheck", "--snapshot", after, "--obligation", obligation["obligation_id"]
    )
    assert (code, out) == (3, "")
    assert err.count("\n") == 1
    assert err.startswith("byte-probe: error: obligation_ids[0]: ")
    assert "needs a person or an agent" in err


def test_a_receipt_prefix_resolves_an_obligation(
    api: PythonDriver, cli: CliRunner, tmp_path: Path
) -> None:
    """`obligations resolve --receipt` takes a receipt prefix through the one resolver."""
    repo = tmp_path / "repo"
    claim_on_receipt(api, repo)
    after = capture(api, repo, EDITED)
    assert cli("gate", "--snapshot", after)[0] == 1
    (obligation,) = ok(api.call("obligation_list", {"state": "open"}))["obligations"]
    plan_id = ok(api.call("probe_plan", {"plan": probe_plan(after)}))["plan_id"]
    rerun = ok(api.call("probe_run", {"plan_id": plan_id, "policy_id": POLICY_ID}))
    code, out, err = cli(
        "obligations",
        "resolve",
        obligation["obligation_id"][:12],
        "--resolution",
        "rechecked",
        "--receipt",
        rerun["receipt_sha256"][:12],
        "--rationale",
        "reran by hand",
    )
    assert code == 0, err
    assert "rechecked via cli" in out
    assert cli("gate", "--snapshot", after)[0] == 0


def test_an_interrupted_recheck_is_taken_up_and_waited_for(
    api: PythonDriver, real_cli: CliRunner, tmp_path: Path
) -> None:
    """The runs of a recheck whose process ended before running them (an interrupted
    CLI on the embedded store) are run by the next `recheck`, which waits for that batch
    and resolves the obligation."""
    repo = tmp_path / "repo"
    claim_on_receipt(api, repo)
    after = capture(api, repo, EDITED)
    svc = api.svc
    # The session's queue is kept from starting the runs: they stay queued, as after a kill.
    svc.queue.start = lambda *_: None  # type: ignore[method-assign]
    first = ok(api.call("obligation_recheck", {"snapshot_id": after, "scope": SCOPE}))
    assert [e["status"] for e in first["entries"]] == ["queued"]
    code, out, err = real_cli("recheck", "--snapshot", after, "--scope", SCOPE)
    assert code == 0, out + err
    assert "rechecked: " + STATEMENT in out
    status = ok(api.call("batch_status", {"batch_id": first["batch_id"]}))
    assert [e["status"] for e in status["recheck"]["entries"]] == ["rechecked"]
