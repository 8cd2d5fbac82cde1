"""A source store with signed evidence: the tinyparse project captured, probed (through the
stub sandbox) under a signing key, and claimed (docs/ARCHITECTURE.md, "Bundles")."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from probe_service.plans import Plan
from probe_service.plans.signing import create_key_pair, read_public_key
from probe_service.service import ProbeService

from ..stubsandbox import Canned, StubSandbox

REPO = Path(__file__).resolve().parents[2]
POLICY = {
    "schema": 1,
    "policies": [
        {
            "id": "walk-python",
            "allowed_executables": ["python3"],
            "timeout_seconds": 30,
            "max_output_bytes": 100000,
            "allowed_domains": [],
            "environment": [],
        }
    ],
}
PLAN = {
    "policy_id": "walk-python",
    "executable": "python3",
    "args": ["check_trailing_comma.py"],
    "hypothesis": "parse_list accepts a trailing comma",
    "failure_refutes": True,
    "oracle": {
        "check": {"kind": "exit_code", "equals": 0},
        "source": "user_requirement",
        "reference": "issue #12",
    },
}
SCOPE = "tinyparse"
#: What the stub leaves in scratch for a plan that writes ``report.xml`` (a junit_xml probe):
#: the report the plan's code would have written.
REPORT_XML = (
    b'<testsuite><testcase classname="m" name="a"/><testcase classname="m" name="b">'
    b'<failure message="boom"/></testcase><testcase classname="m" name="c"/></testsuite>'
)


def _answer(plan: Plan) -> Canned:
    if plan.args and "report.xml" in plan.args[-1]:
        return Canned(scratch_files={"report.xml": REPORT_XML})
    return Canned()


@dataclass
class Source:
    """The exporting side: its session, working tree, the claim and its snapshot."""

    svc: ProbeService
    repo: Path
    snapshot_id: str
    claim_id: str
    receipt: str
    public_key: str
    other_public_key: str
    work: Path


def claim_doc(snapshot_id: str, receipt: str) -> dict[str, object]:
    """The walkthrough's claim: a receipt, the parser's blob and a query over its callers."""
    return {
        "scope": SCOPE,
        "statement": "parse_list accepts a trailing comma",
        "kind": "behavior",
        "snapshot_id": snapshot_id,
        "evidence": [{"receipt": receipt}],
        "dependencies": [
            {"exact_blob": {"path": "tinyparse.py"}},
            {
                "query_set": {
                    "query": {"kind": "grep", "pattern": "parse_list(", "domain": "**/*.py"}
                }
            },
        ],
    }


@pytest.fixture
def source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Source]:
    """Capture, plan, run (signed) and claim on a SQLite store. The run goes through the stub
    sandbox: these tests are about bundles, not about running a probe (docs/ARCHITECTURE.md,
    "Seams"); the walkthrough (``test_walkthrough.py``) carries a real run end to end."""
    admin = tmp_path / "admin"
    admin.mkdir()
    policy = admin / "policies.json"
    policy.write_text(json.dumps(POLICY))
    policy.chmod(0o600)
    private, public, _ = create_key_pair(tmp_path / "keys")
    _, other, _ = create_key_pair(tmp_path / "other-keys")
    monkeypatch.setenv("BYTE_PROBE_POLICY_FILE", str(policy))
    monkeypatch.setenv("BYTE_PROBE_SIGNING_KEY", str(private))
    monkeypatch.delenv("PROBE_DATABASE_URL", raising=False)
    monkeypatch.delenv("PROBE_REDIS_URL", raising=False)
    work = tmp_path / "work"
    repo = work / "repo"
    shutil.copytree(REPO / "examples" / "tinyparse", repo)
    (tmp_path / "a").mkdir()
    svc = ProbeService.open(tmp_path / "a", backend=StubSandbox(_answer))
    snapshot_id = svc.snapshot_capture(root=str(repo)).snapshot_id
    plan_id = svc.probe_plan(plan={**PLAN, "snapshot_id": snapshot_id}).plan_id
    run = svc.probe_run(plan_id=plan_id, policy_id="walk-python", via="embedded")
    receipt = run.receipt.receipt_sha256  # type: ignore[union-attr]
    claim = svc.claim_create(claim=claim_doc(snapshot_id, receipt))
    yield Source(
        svc=svc,
        repo=repo,
        snapshot_id=snapshot_id,
        claim_id=claim.claim_id,
        receipt=receipt,
        public_key=read_public_key(public),
        other_public_key=read_public_key(other),
        work=work,
    )
    svc.close()
