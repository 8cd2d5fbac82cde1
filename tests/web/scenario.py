"""A scenario for the web view: a repository whose probes run (one of them prints hostile
markup and terminal escapes), runs through the queue's embedded workers and in process, a
claim on one receipt and an obligation a change opened. The probes run in the real
sandbox, or are answered by the stub sandbox with what each script prints
(``STUB_ANSWERS``)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from probe_service.policies import POLICY_FILE_ENV
from probe_service.queue import InlineQueue, submit_plans
from probe_service.queue.inline import run_inline
from probe_service.service import ProbeService, SandboxBackend

from ..stubsandbox import Canned, StubSandbox, by_last_arg

POLICY_ID = "web-python"
#: Markup, a script, an event handler, ANSI colour, an OSC title and an OSC 8 link.
HOSTILE = (
    "<script>window.__pwned = 'script'</script>"
    "<img src=x onerror=\"window.__pwned = 'img'\">"
    "<b>bold</b> \x1b[31mred\x1b[0m \x1b]0;title\x07 \x1b]8;;https://evil.example\x07link\x1b]8;;\x07"
)
HOSTILE_HYPOTHESIS = "<script>window.__pwned = 'plan'</script> hostile output stays text"
#: A failing test whose name and message are markup and a script (XML 1.0 allows no
#: terminal escape in a report).
HOSTILE_TEST = "test_<img src=x onerror=\"window.__pwned = 'test'\">"
HOSTILE_MESSAGE = "<script>window.__pwned = 'message'</script> AssertionError"
#: The JUnit report the junit probe writes (one passing and one failing test).
JUNIT_REPORT = (
    '<?xml version="1.0" encoding="utf-8"?><testsuite name="web" tests="2">'
    '<testcase classname="tests.test_web" name="test_ok" time="0.001"/>'
    '<testcase classname="tests.test_web" name="{name}" time="0.002">'
    '<failure message="{message}">trace</failure></testcase></testsuite>'
)


def _attr(text: str) -> str:
    """``text`` as an XML attribute value."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace('"', "&quot;")


REPORT_XML = JUNIT_REPORT.format(name=_attr(HOSTILE_TEST), message=_attr(HOSTILE_MESSAGE))

FILES = {
    "ok.py": "print('all good')\n",
    "fail.py": "import sys\nprint('regressed', file=sys.stderr)\nsys.exit(1)\n",
    "hostile.py": f"import sys\nprint({HOSTILE!r})\nprint({HOSTILE!r}, file=sys.stderr)\n",
    "junit.py": (
        "import os\n"
        "path = os.path.join(os.environ['BYTE_PROBE_SCRATCH'], 'report.xml')\n"
        f"open(path, 'w', encoding='utf-8').write({REPORT_XML!r})\n"
    ),
    "src/parse.py": "def parse(text):\n    return text.split(',')\n",
    "notes/<b>readme</b>.md": "<script>window.__pwned = 'file'</script>\n",
}


#: What each script of ``FILES`` prints and exits with, for the stub sandbox to answer.
STUB_ANSWERS = {
    "ok.py": Canned(stdout=b"all good\n"),
    "fail.py": Canned(exit_code=1, stderr=b"regressed\n"),
    "hostile.py": Canned(stdout=f"{HOSTILE}\n".encode(), stderr=f"{HOSTILE}\n".encode()),
    "junit.py": Canned(scratch_files={"report.xml": REPORT_XML.encode()}),
}


def stub_backend() -> StubSandbox:
    """The stub sandbox answering the scenario's scripts as the real sandbox runs them."""
    return StubSandbox(by_last_arg(STUB_ANSWERS))


@dataclass(frozen=True)
class Scenario:
    """What the scenario stored, by id."""

    root: Path
    snapshot_id: str
    changed_snapshot_id: str
    plan_ids: dict[str, str]
    batch_id: str
    queue_runs: dict[str, str]
    process_run: str
    claim_id: str
    #: A batch of one run whose junit_xml oracle read a report with a failing test.
    junit_batch_id: str
    junit_run: str


def _plan(
    snapshot_id: str, script: str, source: str, hypothesis: str, **extra: object
) -> dict[str, object]:
    return {
        "snapshot_id": snapshot_id,
        "policy_id": POLICY_ID,
        "executable": "python3",
        "args": [script],
        "oracle": {
            "check": {"kind": "exit_code", "equals": 0},
            "source": source,
            **({"reference": "issue #1"} if source != "model_inferred" else {}),
        },
        "hypothesis": hypothesis,
        **extra,
    }


def write_policy(root: Path) -> Path:
    """The administrator's policy file for the scenario, owner-only."""
    path = root / "policies.json"
    policy = {
        "schema": 1,
        "policies": [
            {
                "id": POLICY_ID,
                "allowed_executables": ["python3"],
                "timeout_seconds": 30,
                "max_output_bytes": 100_000,
                "allowed_domains": [],
                "environment": [],
                "max_processes": 32,
                "memory_bytes": 512 * 1024 * 1024,
            }
        ],
    }
    path.write_text(json.dumps(policy), encoding="utf-8")
    path.chmod(0o600)
    return path


def fill(root: Path, backend: SandboxBackend | None = None) -> Scenario:
    """Fill the store under ``root/state``, running the probes through ``backend`` (the
    real sandbox by default); sets the policy-file variable for this process."""
    repo, state = root / "repo", root / "state"
    for rel, text in FILES.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text, encoding="utf-8")
    state.mkdir()
    os.environ[POLICY_FILE_ENV] = str(write_policy(root))
    with ProbeService.open(state, backend=backend) as svc:
        snap = svc.snapshot_capture(root=str(repo)).snapshot_id
        plans = {
            "ok": _plan(snap, "ok.py", "user_requirement", "ok.py exits 0"),
            "fail": _plan(
                snap, "fail.py", "historical_regression", "fail.py exits 0", failure_refutes=True
            ),
            "hostile": _plan(snap, "hostile.py", "model_inferred", HOSTILE_HYPOTHESIS),
        }
        plan_ids = {k: svc.probe_plan(plan=p).plan_id for k, p in plans.items()}
        submitted = submit_plans(
            svc.store, InlineQueue(svc.settings), list(plan_ids.values()), POLICY_ID, reuse=False
        )
        run_inline(svc.store, submitted.run_ids, settings=svc.settings, backend=svc.backend)
        queue_runs = dict(zip(plan_ids, submitted.run_ids, strict=True))
        junit_plan = _plan(snap, "junit.py", "user_requirement", "the web suite passes")
        junit_plan["oracle"]["check"] = {"kind": "junit_xml", "require": []}  # type: ignore[index]
        junit_id = svc.probe_plan(plan=junit_plan).plan_id
        junit = submit_plans(svc.store, InlineQueue(svc.settings), [junit_id], POLICY_ID)
        run_inline(svc.store, junit.run_ids, settings=svc.settings, backend=svc.backend)
        # No bound on the wait: the run executes here, now, without a run row.
        process = svc.probe_run(
            plan_id=plan_ids["hostile"],
            policy_id=POLICY_ID,
            reuse=False,
            via="embedded",
            wait_seconds=None,
        )
        ok_receipt = svc.receipt_get(receipt_id=queue_runs["ok"])["receipt_sha256"]
        claim = svc.claim_create(
            claim={
                "scope": "web",
                "statement": "<script>window.__pwned = 'claim'</script> parse splits on commas",
                "kind": "behavior",
                "snapshot_id": snap,
                "evidence": [{"receipt": ok_receipt}],
                "dependencies": [{"exact_blob": {"path": "src/parse.py"}}],
            }
        )
        (repo / "src/parse.py").write_text("def parse(text):\n    return text.split(';')\n")
        changed = svc.snapshot_capture(root=str(repo)).snapshot_id
        svc.change_analyze(from_snapshot=snap, to_snapshot=changed, scope="web")
    return Scenario(
        root=root,
        snapshot_id=snap,
        changed_snapshot_id=changed,
        plan_ids=plan_ids,
        batch_id=submitted.batch_id,
        queue_runs=queue_runs,
        process_run=process.run_id,
        claim_id=claim.claim_id,
        junit_batch_id=junit.batch_id,
        junit_run=junit.run_ids[0],
    )
