"""``byte-probe demo``: the main job on the embedded default, start to finish.

Captures the shipped example repository, plans three probes, runs them in the sandbox
and prints their receipts: one supports, one refutes (a historical regression whose
failure was declared to refute), one stays inconclusive (a model-inferred oracle).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from .errors import InternalError
from .safe_text import untrusted
from .service import ProbeService
from .service.adapters import RunStatus
from .settings import read_settings

__all__ = ["DEMO_POLICY", "EXAMPLE_REPO", "demo_plans", "run_demo"]

#: The example repository shipped beside the package.
EXAMPLE_REPO = Path(__file__).resolve().parent.parent / "examples" / "tinyparse"

DEMO_POLICY: dict[str, Any] = {
    "schema": 1,
    "policies": [
        {
            "id": "demo-python-no-network",
            "allowed_executables": ["python3"],
            "timeout_seconds": 30,
            "max_output_bytes": 100_000,
            "allowed_domains": [],
            "environment": ["LANG"],
            "max_processes": 32,
            "memory_bytes": 512 * 1024 * 1024,
        }
    ],
}


def demo_plans(snapshot_id: str) -> list[dict[str, Any]]:
    """The three demo plans against ``snapshot_id``."""
    base = {"snapshot_id": snapshot_id, "policy_id": "demo-python-no-network"}
    return [
        {
            **base,
            "executable": "python3",
            "args": ["check_trailing_comma.py"],
            "oracle": {
                "check": {"kind": "exit_code", "equals": 0},
                "source": "user_requirement",
                "reference": "issue #12: accept a trailing comma",
            },
            "hypothesis": "parse_list accepts a trailing comma",
        },
        {
            **base,
            "executable": "python3",
            "args": ["check_empty_items.py"],
            "oracle": {
                "check": {"kind": "exit_code", "equals": 0},
                "source": "historical_regression",
                "reference": "issue #7: '[1,,2]' must be rejected",
            },
            "failure_refutes": True,
            "hypothesis": "parse_list rejects an empty item",
        },
        {
            **base,
            "executable": "python3",
            "args": ["-c", "from tinyparse import parse_list; print(parse_list('[4, 5]'))"],
            "oracle": {
                "check": {"kind": "stdout_contains", "text": "[4, 5]"},
                "source": "model_inferred",
            },
            "hypothesis": "parse_list keeps the order of items",
        },
    ]


def write_demo_policy(workdir: Path) -> Path:
    """Write the demo's policy file with owner-only permissions and return its path."""
    path = workdir / "probe-policies.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(DEMO_POLICY, handle, indent=2)
    os.chmod(path, 0o600)
    return path


def run_demo(
    workdir: Path, console: Console, *, show_table: Callable[[Console, Table], None]
) -> int:
    """Run the main job under ``workdir``; return 0 when the three outcomes are as designed.

    ``show_table`` prints the receipts table: the CLI's, which is plain when stdout is not a
    terminal (docs/ARCHITECTURE.md, "CLI output"); a face never imports the CLI itself."""
    workdir = workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    # The demo is the administrator here: its session reads the demo's own policy file.
    policy_file = write_demo_policy(workdir)
    # Through the operation table, as the CLI: one session over the demo's own embedded
    # store under its work directory, whatever PROBE_DATABASE_URL names.
    settings = read_settings().replace(database_url=None)
    with ProbeService.open(
        workdir, settings=settings, interface="cli", policy_file=policy_file
    ) as svc:
        capture = svc.snapshot_capture(root=str(EXAMPLE_REPO))
        # One line in a log too: Rich would wrap it at 80 columns off a terminal.
        console.print(
            untrusted(f"snapshot {capture.snapshot_id} ({capture.files} files) of {EXAMPLE_REPO}"),
            soft_wrap=True,
        )
        table = Table(title="probe receipts", show_lines=True)
        table.add_column("hypothesis", ratio=3)
        table.add_column("oracle", ratio=2, overflow="fold")
        table.add_column("outcome", no_wrap=True)
        table.add_column("reason", ratio=2, overflow="fold")
        table.add_column("exit", no_wrap=True)
        table.add_column("receipt", no_wrap=True)
        outcomes = []
        for plan in demo_plans(capture.snapshot_id):
            plan_id = svc.probe_plan(plan=plan).plan_id
            result = svc.probe_run(
                plan_id=plan_id, policy_id=plan["policy_id"], via="embedded", wait_seconds=None
            )
            if isinstance(result, RunStatus):  # an unbounded wait ends with the result
                raise InternalError(f"run {result.run_id}: answered before it was done")
            outcomes.append(result.outcome)
            # Plan text and the reason (which can quote probe output) are data, never markup.
            table.add_row(
                untrusted(plan["hypothesis"]),
                untrusted(plan["oracle"]["source"]),
                untrusted(result.outcome),
                untrusted(result.reason),
                str(result.exit_code),
                result.receipt_sha256[:12] + (" (reused)" if result.reused else ""),
            )
        show_table(console, table)
    return 0 if outcomes == ["supports", "refutes", "inconclusive"] else 1
