"""``byte-probe gc``: dry run and removal on an aged store; refusals name their reason."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import text

from probe_service.store import open_store

from .conftest import CliRunner

_OLD = datetime.now(UTC) - timedelta(days=90)


def _with_retention(policy: Path, retention: dict[str, object]) -> None:
    document = json.loads(policy.read_text())
    policy.write_text(json.dumps({**document, "schema": 3, "retention": retention}))


def _age_store(tmp_path: Path, count: int) -> None:
    """Plans, runs and receipts written 90 days ago, straight into the store."""
    store = open_store(tmp_path / "state")
    old_ms = int(_OLD.timestamp() * 1000)
    with store.transaction() as conn:
        for i in range(count):
            plan_id, run_id = f"{i:064x}", f"run-{i}"
            conn.execute(
                text("INSERT INTO plans (plan_id, body, created_at) VALUES (:p, '{}', :at)"),
                {"p": plan_id, "at": _OLD.isoformat(timespec="microseconds")},
            )
            conn.execute(
                text(
                    "INSERT INTO runs (run_id, batch_id, seq, plan_id, policy_id, state, "
                    "attempts, submitted_ms, finished_ms, receipt_sha256, outcome, reason) "
                    "VALUES (:r, 'b', :i, :p, 'x', 'done', 1, :ms, :ms, :sha, 'supports', 'ok')"
                ),
                {"r": run_id, "i": i, "p": plan_id, "ms": old_ms, "sha": f"{i:064x}"},
            )
            conn.execute(
                text(
                    "INSERT INTO receipts (run_id, receipt_sha256, plan_id, action_key, outcome, "
                    "reason, reusable, body, created_at) VALUES (:r, :sha, :p, :sha, "
                    "'supports', 'ok', true, '{\"committed\": {}}', :at)"
                ),
                {"r": run_id, "sha": f"{i:064x}", "p": plan_id, "at": _OLD.isoformat()},
            )
    store.close()


def test_gc_without_retention_is_refused(cli: CliRunner) -> None:
    """A policy file without a retention section: exit 3, one line naming it."""
    code, _out, err = cli("gc", "--dry-run")
    assert code == 3
    assert "retention" in err
    assert len(err.strip().splitlines()) == 1


def test_retention_below_the_floor_is_refused(cli: CliRunner, environment: Path) -> None:
    """runs_days 0 is below the one-day floor: the policy file is refused, naming the key."""
    _with_retention(environment, {"runs_days": 0})
    code, _out, err = cli("gc")
    assert code == 3
    assert "retention.runs_days" in err


def test_grace_below_the_floor_is_refused(cli: CliRunner, environment: Path) -> None:
    """A grace period under 30 minutes is refused, naming the key."""
    _with_retention(environment, {"runs_days": 1, "grace_minutes": 5})
    code, _out, err = cli("gc")
    assert code == 3
    assert "retention.grace_minutes" in err


def test_dry_run_then_gc_on_an_aged_store(
    cli: CliRunner, environment: Path, tmp_path: Path
) -> None:
    """gc --dry-run counts per kind and removes nothing; gc removes what it counted."""
    _with_retention(environment, {"runs_days": 30, "receipts_days": 30, "plans_days": 30})
    code, _out, _err = cli("capabilities")  # creates the store
    _age_store(tmp_path, 5)
    code, out, err = cli("gc", "--dry-run", "--json")
    assert code == 0, err
    planned = {k["kind"]: k["removed"] for k in json.loads(out)["kinds"]}
    assert planned["runs"] == planned["receipts"] == planned["plans"] == 5
    code, out, _err = cli("gc", "--dry-run")
    assert "would remove" in out
    code, out, err = cli("gc", "--json")
    assert code == 0, err
    removed = {k["kind"]: k["removed"] for k in json.loads(out)["kinds"]}
    assert removed == planned
    code, out, _err = cli("gc", "--dry-run", "--json")
    assert all(k["removed"] == 0 for k in json.loads(out)["kinds"])
