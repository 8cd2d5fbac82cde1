"""F5, F11: a probe-shaped tree deeper than Python's recursion limit, read-only, with links.

Before: the host-side scratch walk and ``shutil.rmtree`` raised RecursionError, exit 70,
no receipt, the run directory left; through the queue three attempts, ``worker_lost``
and three directories left. Now every walk is iterative and every run ends with a
receipt and no run directory, whatever the tree or the error.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import select

from probe_service.plans import parse_plan
from probe_service.plans.execution import RuntimeBackend
from probe_service.queue import (
    InlineQueue,
    ProbeQueue,
    Queue,
    WorkerContext,
    execute_run,
    submit_plans,
)
from probe_service.queue.tables import runs
from probe_service.sandbox import SandboxRuntime
from probe_service.settings import read_settings
from probe_service.store import Store

from .. import calls as service
from ..queue.conftest import Farm, wait_done
from .attacks import POLICY_ID, RunProbe, leftovers, plan_for

pytestmark = pytest.mark.sandbox

#: Deeper than the interpreter's recursion limit (1,000), as in the red-team run.
DEPTH = 1500
#: A 1,500-deep chain in scratch; every 100th level holds a link to the host file
#: (absolute target), a link back up the chain and a file, and is then made read-only.
DEEP_CHAIN = f"""
set -e
cd "$BYTE_PROBE_SCRATCH"
i=0
while [ $i -lt {DEPTH} ]; do
  mkdir d && cd d
  i=$((i+1))
  if [ $((i % 100)) -eq 0 ]; then
    ln -s "$1" ../host-link
    ln -s .. ../up
    echo data > ../f
    chmod 500 ..
  fi
done
"""


def _submit(
    store: Store, repo: Path, args: list[str], queue: Queue | None = None
) -> tuple[str, str]:
    """Capture ``repo``, submit ``args[0] args[1:]`` as one run (to ``queue``, else left in
    the store for ``execute_run``); return (batch id, run id)."""
    (repo / "README").write_text("hello\n")
    snapshot_id = service.snapshot_capture(store, repo).snapshot_id
    plan = parse_plan(plan_for(snapshot_id, args[0], args[1:]))
    submitted = submit_plans(store, queue or InlineQueue(read_settings()), [plan], POLICY_ID)
    return submitted.batch_id, submitted.run_ids[0]


def _run_row(store: Store, run_id: str) -> tuple[str, int, str]:
    """The run's (state, attempts, reason)."""
    with store.reading() as conn:
        row = conn.execute(select(runs).where(runs.c.run_id == run_id)).one()
    return row.state, row.attempts, row.reason


@pytest.fixture
def pg_url(pg_migrated_url: str) -> str:
    """The farm's store URL is the test's own store (``pg_store``'s schema, from the pool)."""
    return pg_migrated_url


@pytest.fixture
def worker(pg_store: Store, runtime: SandboxRuntime, policy_file: Path) -> WorkerContext:
    """The worker's context over the PostgreSQL store and the attack policy."""
    return WorkerContext(store=pg_store, backend=RuntimeBackend(runtime))


def _host_file(tmp_path: Path) -> Path:
    target = tmp_path / "host" / "keep.txt"
    target.parent.mkdir()
    target.write_text("host data\n")
    return target


def test_deep_read_only_chain_in_scratch_leaves_nothing(
    run_probe: RunProbe, small_snapshot: str, sqlite_store: Store, run_tmp: Path, tmp_path: Path
) -> None:
    """A 1,500-deep read-only chain with links: receipt written, run dir gone, host intact."""
    host = _host_file(tmp_path)
    assert leftovers(run_tmp) == []
    result = run_probe(small_snapshot, "sh", ["-c", DEEP_CHAIN, "sh", str(host)])
    assert (result.status, result.exit_code) == ("ok", 0), (
        result.reason,
        result.receipt.operational.to_json()["detail"],
    )
    assert result.outcome == "supports"
    assert service.receipt_get(sqlite_store, result.run_id).receipt_sha256
    assert leftovers(run_tmp) == []
    assert host.read_text() == "host data\n"


@pytest.mark.postgres
def test_deep_chain_through_the_queue_leaves_nothing(
    worker: WorkerContext, run_tmp: Path, tmp_path: Path, repo: Path
) -> None:
    """Through the worker's actor body: one attempt, a receipt, no run directory."""
    host = _host_file(tmp_path)
    _, run_id = _submit(worker.store, repo, ["sh", "-c", DEEP_CHAIN, "sh", str(host)])
    assert execute_run(worker, run_id) == "supports"
    assert _run_row(worker.store, run_id) == ("done", 1, "oracle_passed")
    assert service.receipt_get(worker.store, run_id).committed.outcome == "supports"
    assert leftovers(run_tmp) == []
    assert host.read_text() == "host data\n"


@pytest.mark.postgres
@pytest.mark.redis
def test_deep_chain_through_a_worker_farm_leaves_nothing(
    pg_store: Store,
    start_farm: Callable[..., Farm],
    redis_url: str,
    redis_namespace: str,
    run_tmp: Path,
    tmp_path: Path,
    repo: Path,
) -> None:
    """Real worker processes: one attempt (never `worker_lost`), a receipt, no run dir."""
    host = _host_file(tmp_path)
    start_farm(processes=1, threads=1, TMPDIR=str(run_tmp))
    queue = ProbeQueue(redis_url, namespace=redis_namespace)
    try:
        batch_id, run_id = _submit(pg_store, repo, ["sh", "-c", DEEP_CHAIN, "sh", str(host)], queue)
    finally:
        queue.close()
    wait_done(pg_store, batch_id, 1)
    assert _run_row(pg_store, run_id) == ("done", 1, "oracle_passed")
    assert service.receipt_get(pg_store, run_id).committed.outcome == "supports"
    assert leftovers(run_tmp) == []
    assert host.read_text() == "host data\n"


@pytest.mark.postgres
class TestUnexpectedErrors:
    def test_defect_in_the_runner_still_writes_a_receipt(
        self, worker: WorkerContext, run_tmp: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A defect after the probe ran: inconclusive `internal_error` receipt, no run dir."""
        _, run_id = _submit(worker.store, repo, ["sh", "-c", "mkdir -p $BYTE_PROBE_SCRATCH/x"])

        def broken_check(*_args: object) -> None:
            raise RecursionError("maximum recursion depth exceeded")

        monkeypatch.setattr("probe_service.plans.run.evaluate_check", broken_check)
        assert execute_run(worker, run_id) == "inconclusive"
        committed = service.receipt_get(worker.store, run_id).committed.json_values()
        assert (committed["outcome"], committed["reason"]) == ("inconclusive", "internal_error")
        assert leftovers(run_tmp) == []

    def test_defect_in_the_worker_still_writes_a_receipt(
        self, worker: WorkerContext, run_tmp: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A defect outside the plan runner: the worker ends the run with a receipt, once."""
        _, run_id = _submit(worker.store, repo, ["true"])

        def broken_run(*_args: object, **_kwargs: object) -> None:
            raise KeyError("defect")

        monkeypatch.setattr("probe_service.queue.execute.probe_run", broken_run)
        assert execute_run(worker, run_id) == "internal_error"
        assert execute_run(worker, run_id) == "already_done"
        receipt = service.receipt_get(worker.store, run_id)
        assert receipt.committed.to_json()["reason"] == "internal_error"
        assert "KeyError" in receipt.operational.to_json()["detail"]
        assert _run_row(worker.store, run_id) == ("done", 1, "internal_error")
        assert leftovers(run_tmp) == []
