"""The writing side of the crash test: one operation, killed at its Nth SQL statement.

``run_operation`` runs in a forked child. It first writes what the operation needs (not
instrumented), then arms a hook on the engine that SIGKILLs the process just before its
``kill_at``-th statement of the operation itself, so a seeded ``kill_at`` is a repeatable
kill point (docs/ARCHITECTURE.md, store: every write is one transaction).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from sqlalchemy import event

from probe_service.claims import (
    change_analyze,
    claim_create,
    no_receipts,
    obligation_list,
    obligation_resolve,
)
from probe_service.plans import Receipt, parse_plan, plan_id_of
from probe_service.plans.persist import save_plan, save_receipt
from probe_service.queue.runs import create_runs, finish_run_in
from probe_service.queue.take import take_run
from probe_service.snapshot.capture import snapshot_capture
from probe_service.store import Store, open_store

from ..claims.helpers import claim_request
from ..receipt_fields import committed_fields, receipt_of

OPERATIONS = ("capture", "plan", "run", "claim", "analyze", "resolve")


class KillSwitch:
    """Counts statements once armed and SIGKILLs the process at the ``kill_at``-th."""

    def __init__(self, store: Store, kill_at: int) -> None:
        self.kill_at = kill_at
        self.armed = False
        self.count = 0
        event.listen(store.engine, "before_cursor_execute", self._before)

    def _before(self, *_: Any) -> None:
        if not self.armed:
            return
        self.count += 1
        if self.count == self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)


def _capture(store: Store, tree: Path, tag: str) -> str:
    (tree / "src").mkdir(parents=True, exist_ok=True)
    (tree / "src" / "parse.py").write_text(f"def parse(text):\n    return {tag!r}\n")
    (tree / "README.md").write_text(f"readme {tag}\n")
    return snapshot_capture(store, tree).snapshot_id


def _receipt(plan_id: str, snapshot_id: str, run_id: str) -> Receipt:
    committed = {
        **committed_fields(),
        "outcome": "supports",
        "reason": "oracle_passed",
        "exit_code": 0,
        "elapsed_us": 1,
        "snapshot_id": snapshot_id,
        "plan_id": plan_id,
        "action_key": run_id.ljust(64, "0")[:64],
    }
    return receipt_of(committed, {"worker": "crash-test"})


def _plan(snapshot_id: str, tag: str) -> Any:
    return parse_plan(
        {
            "snapshot_id": snapshot_id,
            "policy_id": "crash-policy",
            "executable": "python3",
            "args": ["-c", f"print({tag!r})"],
            "oracle": {
                "check": {"kind": "exit_code", "equals": 0},
                "source": "user_requirement",
                "reference": "crash test",
            },
        }
    )


def run_operation(root: Path, url: str | None, operation: str, tag: str, kill_at: int) -> int:
    """Run ``operation`` once (``tag`` makes its content new); return statements it ran."""
    store = open_store(root, url)
    switch = KillSwitch(store, kill_at)
    tree = root / f"tree-{tag}"
    if operation == "capture":
        switch.armed = True
        _capture(store, tree, tag)
    elif operation == "plan":
        snapshot_id = _capture(store, tree, tag)
        switch.armed = True
        save_plan(store, _plan(snapshot_id, tag))
    elif operation == "run":
        snapshot_id = _capture(store, tree, tag)
        plan = _plan(snapshot_id, tag)
        save_plan(store, plan)
        (run_id,) = create_runs(store, f"batch-{tag}", [(plan_id_of(plan), "crash-policy")])
        switch.armed = True
        # The worker's store path: one transaction takes the run (a 1 ms lease: once
        # killed, the janitor finds it expired at once), one finishes it.
        take_run(store, run_id, "crash-writer", 1)
        receipt = _receipt(plan_id_of(plan), snapshot_id, run_id)
        save_receipt(
            store,
            run_id,
            receipt,
            reusable=False,
            also=lambda conn: finish_run_in(
                conn,
                run_id,
                outcome="supports",
                reason="oracle_passed",
                receipt_sha256=receipt.receipt_sha256,
                action_key=receipt.committed.action_key,
            ),
        )
    elif operation == "claim":
        snapshot_id = _capture(store, tree, tag)
        switch.armed = True
        claim_create(store, claim_request(snapshot_id, scope=f"s-{tag}"), receipts=no_receipts)
    else:
        start = _capture(store, tree, tag)
        claim_create(store, claim_request(start, scope=f"s-{tag}"), receipts=no_receipts)
        end = _capture(store, tree, f"{tag}-changed")
        if operation == "analyze":
            switch.armed = True
            change_analyze(store, start, end)
        else:
            change_analyze(store, start, end)
            (opened,) = obligation_list(store, state="open", scope=f"s-{tag}")
            switch.armed = True
            obligation_resolve(store, opened.obligation_id, "accepted_risk", "crash test")
    store.close()
    return switch.count
