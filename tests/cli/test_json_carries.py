"""Everything a person is shown of a run, JSON carries, under the same names everywhere
(docs/ARCHITECTURE.md, "Saying why"): `run --json`, `receipt show --json`, `submit --json`
and the faces' `probe_run` / `receipt_get` carry `detail`, the check (an oracle error's
cause), the phases and the limits applied.

Before: `run --json` left out `detail`, so an agent reading JSON never learned which link,
limit or report made a run `inconclusive`; the check's detail was shown nowhere.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from probe_service.service import operations

from .conftest import POLICY_ID, CliRunner, PlanCreator, exit_oracle

pytestmark = pytest.mark.sandbox

#: What `run` prints for a person (a row label) and the JSON field that carries it.
SHOWN_AS = {
    "outcome": "outcome",
    "reason": "reason",
    "status": "status",
    "exit_code": "exit_code",
    "detail": "detail",
    "check": "check",
    "timings": "elapsed_us",
    "memory": "memory_peak_bytes",
    "phases": "phases",
    "limits_applied": "limits_applied",
    "plan_id": "plan_id",
    "snapshot_id": "snapshot_id",
    "policy_id": "policy_id",
    "receipt": "receipt_sha256",
    "reused": "reused",
}
SUMMARY = ("outcome", "reason", "detail", "check", "phases", "limits_applied", "exit_code")

JUNIT = {
    "check": {"kind": "junit_xml", "path": "report.xml"},
    "source": "historical_regression",
    "reference": "issue #7",
}


def _run(cli: CliRunner, plan_id: str, *extra: str) -> tuple[int, str]:
    code, out, err = cli("run", plan_id, "--policy", POLICY_ID, *extra)
    assert code in (0, 1, 2), err
    return code, out


def test_an_oracle_errors_cause_is_in_run_json_and_shown(
    real_cli: CliRunner, created: PlanCreator
) -> None:
    """A JUnit oracle whose report was never written: inconclusive, and `run --json` says
    why in `check.detail`, with the phases and the limits that were in force; every row
    the person sees has its field."""
    plan_id = created("print('no report')", oracle=JUNIT)
    code, out = _run(real_cli, plan_id, "--json")
    doc = json.loads(out)
    assert code == 2
    assert (doc["outcome"], doc["reason"]) == ("inconclusive", "oracle_error")
    assert doc["check"]["error"] is True
    assert "report.xml" in doc["check"]["detail"]
    assert {"materialize", "canary", "execute"} <= set(doc["phases"])
    assert doc["limits_applied"]["timeout_seconds"] == 20
    assert 0 < doc["memory_peak_bytes"] <= doc["limits_applied"]["memory_bytes"]
    assert "detail" in doc
    _, text = _run(real_cli, plan_id)
    # Off a terminal the table is plain: a row is its label, two or more spaces, its value.
    rows = (re.match(r"^ *(\S+(?: \S+)*) {2,}\S", line) for line in text.splitlines())
    shown = {row.group(1) for row in rows if row is not None}
    assert {"check", "limits_applied", "memory"} <= shown
    assert shown - {""} <= set(SHOWN_AS), shown - set(SHOWN_AS)
    assert {SHOWN_AS[label] for label in shown - {""}} <= set(doc)


def test_a_refusals_detail_is_in_every_json(
    real_cli: CliRunner, repo: Path, tmp_path: Path, created: PlanCreator
) -> None:
    """A run refused for an escaping link names the link in `detail`, and `run --json`,
    `receipt show --json` and `submit --json` carry the same summary under the same
    names."""
    (repo / "data.txt").write_text("x\n")
    os.symlink("/etc/hostname", repo / "out")
    code, out, _ = real_cli("snapshot", "capture", str(repo), "--json")
    assert code == 0
    captured = json.loads(out)
    assert "'out'" in captured["escaping_links"][0]
    plan_id = created("print(1)", snapshot_id=captured["snapshot_id"], oracle=exit_oracle())
    code, out = _run(real_cli, plan_id, "--json")
    ran = json.loads(out)
    assert (ran["reason"], code) == ("snapshot_link_escapes", 2)
    assert "'out'" in ran["detail"]
    code, shown, _ = real_cli("receipt", "show", ran["receipt_sha256"][:12], "--json")
    receipt = json.loads(shown)
    plans = tmp_path / "plans.jsonl"
    plans.write_text(plan_id + "\n")
    code, submitted, err = real_cli("submit", str(plans), "--policy", POLICY_ID, "--json")
    result = json.loads(submitted)["results"][0]
    for name in SUMMARY:
        assert receipt[name] == ran[name], name
        assert result[name] == ran[name], name
    code, _, err = real_cli("receipt", "verify", _write(tmp_path / "r.json", receipt), root=False)
    assert code == 0, err  # the summary beside the receipt leaves it verifiable


def test_every_face_declares_the_same_fields() -> None:
    """probe_run's response schema (the same on every face) has the summary fields: the
    result's, beside the status it answers with when its wait expires."""
    for op in operations("mcp"):
        if op.name == "probe_run":
            schema = op.schemas()["response"]
            properties = schema["$defs"]["ProbeRunResult"]["properties"]
            assert set(SUMMARY) <= set(properties)
            refs = {branch["$ref"].rpartition("/")[2] for branch in schema["anyOf"]}
            assert refs == {"ProbeRunResult", "RunStatus"}


def _write(path: Path, document: dict[str, Any]) -> str:
    path.write_text(json.dumps(document))
    return str(path)
