"""A recheck on a real farm: worker processes, Redis, PostgreSQL and the real sandbox
(docs/ARCHITECTURE.md, "Recheck").

The reruns go through the queue; the worker that finishes the batch's last run settles
the recheck, with no one polling; a later poll finds it settled and writes nothing more.
The CLI on the farm waits with progress and exits 0 once the obligation is resolved.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from probe_service.claims.tables import obligation_resolutions, recheck_settlements
from probe_service.policies import POLICY_FILE_ENV
from probe_service.service import ProbeService
from probe_service.settings import NAMESPACE_ENV, REDIS_URL_ENV
from probe_service.store import DATABASE_URL_ENV, Store

from ..faces.drivers import PythonDriver
from ..rechecking import (
    EDITED,
    SCOPE,
    SETTLE_DEADLINE_S,
    capture,
    claim_on_receipt,
    ok,
    write_policy,
)
from .conftest import Farm, wait_done

pytestmark = pytest.mark.sandbox


def _count(store: Store, table: Any) -> int:
    with store.reading() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


def _settled_by(store: Store, batch_id: str) -> str | None:
    with store.reading() as conn:
        found = conn.execute(
            select(recheck_settlements.c.settled_by).where(
                recheck_settlements.c.batch_id == batch_id
            )
        ).scalar()
    return None if found is None else str(found)


def _wait_settled(store: Store, batch_id: str) -> str:
    """The settler of ``batch_id``, once some settler wrote the row (liveness bound)."""
    deadline = time.monotonic() + SETTLE_DEADLINE_S
    while time.monotonic() < deadline:
        who = _settled_by(store, batch_id)
        if who is not None:
            return who
        time.sleep(0.1)
    pytest.fail(f"recheck {batch_id} never settled")


def test_the_worker_finishing_the_last_run_settles_the_recheck(
    shared_store: Store,
    pg_url: str,
    redis_url: str,
    redis_namespace: str,
    start_farm: Callable[..., Farm],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Submitted from the Python API and never polled, the recheck is settled by a farm
    worker; a later batch_status reports it and resolves nothing twice; then the CLI's
    `recheck` on the farm waits with progress and exits 0."""
    policy = write_policy(tmp_path / "recheck-policies.json")
    farm = start_farm(processes=2, threads=1, BYTE_PROBE_POLICY_FILE=str(policy))
    owners = {f"{socket.gethostname()}:{worker.pid}" for worker in farm.workers()}
    env = {
        POLICY_FILE_ENV: str(policy),
        REDIS_URL_ENV: redis_url,
        NAMESPACE_ENV: redis_namespace,
        DATABASE_URL_ENV: pg_url,
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    repo = tmp_path / "repo"
    with ProbeService.open(tmp_path) as svc:
        assert not svc.queue.embedded
        api = PythonDriver(svc)
        claim_on_receipt(api, repo)  # the first run, too, goes through the farm
        after = capture(api, repo, EDITED)
        started = ok(api.call("obligation_recheck", {"snapshot_id": after, "scope": SCOPE}))
        batch_id = started["batch_id"]
        wait_done(shared_store, batch_id, 1)  # counts only: no poll of the recheck
        assert _wait_settled(shared_store, batch_id) in owners
        status = ok(api.call("batch_status", {"batch_id": batch_id}))
        assert status["recheck"]["settled"]
        assert [e["status"] for e in status["recheck"]["entries"]] == ["rechecked"]
        assert _count(shared_store, recheck_settlements) == 1
        assert _count(shared_store, obligation_resolutions) == 1
        assert ok(api.call("gate", {"snapshot_id": after, "scope": SCOPE}))["passed"]
        again = capture(api, repo, EDITED + "\n# a comment\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "probe_service.cli",
            "recheck",
            "--snapshot",
            again,
            "--scope",
            SCOPE,
            "--root",
            str(tmp_path),
        ],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=SETTLE_DEADLINE_S,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "recheck: 1/1 rerun(s) done supports=1" in done.stderr
    assert _count(shared_store, recheck_settlements) == 2
    assert _count(shared_store, obligation_resolutions) == 2
