"""Asynchronous runs: ``probe_run`` waits at most ``wait_seconds`` and answers with the run's
status (its id to poll) when the run is not done; ``probe_submit`` and ``run_status`` follow
runs to their receipt (docs/ARCHITECTURE.md, "Asynchronous runs").

A plan that sleeps 3 s cannot be done after a wait of 0.2 s, whatever the machine's load, so
the "not done yet" answers below do not depend on timing; every wait for the end is a
bounded poll (``BATCH_DEADLINE_S``), never a threshold.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy import select

from probe_service.errors import PolicyError
from probe_service.plans import verify_receipt
from probe_service.queue import RunStatus
from probe_service.queue.tables import runs
from probe_service.service import ProbeService
from probe_service.settings import read_settings
from probe_service.store import Store

from .conftest import BATCH_DEADLINE_S, POLICY_ID, shell_plan

pytestmark = pytest.mark.sandbox

SLOW = "sleep 3; echo slept"


def _until_done(svc: ProbeService, run_id: str) -> RunStatus:
    """Poll run_status (by an 8-hex prefix) until the run is done, within the deadline."""
    deadline = time.monotonic() + BATCH_DEADLINE_S
    while time.monotonic() < deadline:
        status = svc.run_status(run_id=run_id[:8])
        if status.state == "done":
            return status
        time.sleep(0.2)
    raise AssertionError(f"run {run_id} not done within {BATCH_DEADLINE_S}s: {status}")


@pytest.fixture
def embedded(shared_store: Store, policy_file: Path) -> ProbeService:
    """A session without a broker over the shared store, under the queue tests' policy."""
    return ProbeService(shared_store, settings=read_settings({}), policy_file=policy_file)


class TestEmbedded:
    def test_a_run_not_done_in_time_answers_its_status_and_goes_on(
        self, embedded: ProbeService, snapshot_id: str
    ) -> None:
        """The bounded wait expires: the answer is the run's status with its id; polling it
        gives the result, receipt included, which verifies offline."""
        plan_id = embedded.probe_plan(plan=shell_plan(snapshot_id, SLOW, "slow")).plan_id
        answer = embedded.probe_run(plan_id=plan_id, policy_id=POLICY_ID, wait_seconds=0.2)
        assert isinstance(answer, RunStatus)
        assert answer.state in ("queued", "running")
        assert answer.result is None
        assert "poll run_status" in answer.next
        done = _until_done(embedded, answer.run_id)
        assert done.result is not None
        assert (done.outcome, done.result.stdout) == ("supports", "slept\n")
        assert verify_receipt(done.result.receipt) == done.receipt_sha256

    def test_a_run_done_in_time_answers_its_result(
        self, embedded: ProbeService, snapshot_id: str
    ) -> None:
        """Within the wait the answer is the result itself, as before."""
        plan_id = embedded.probe_plan(plan=shell_plan(snapshot_id, "exit 0", "quick")).plan_id
        answer = embedded.probe_run(plan_id=plan_id, policy_id=POLICY_ID, wait_seconds=240)
        assert not isinstance(answer, RunStatus)
        assert answer.outcome == "supports"

    def test_closing_the_session_never_abandons_a_run(
        self, shared_store: Store, policy_file: Path, snapshot_id: str
    ) -> None:
        """A session closed right after the status answer waits for the run: the receipt is
        written, and another session over the store reads it."""
        first = ProbeService(shared_store, settings=read_settings({}), policy_file=policy_file)
        plan_id = first.probe_plan(plan=shell_plan(snapshot_id, SLOW, "closing")).plan_id
        answer = first.probe_run(plan_id=plan_id, policy_id=POLICY_ID, wait_seconds=0.2)
        assert isinstance(answer, RunStatus)
        first.embedded_queue.close()  # what closing the session does before the store
        later = ProbeService(shared_store, settings=read_settings({}))
        status = later.run_status(run_id=answer.run_id)
        assert (status.state, status.outcome) == ("done", "supports")

    def test_submit_returns_at_once_and_the_runs_execute_here(
        self, embedded: ProbeService, snapshot_id: str
    ) -> None:
        """probe_submit without a broker answers with the run ids before they are done and
        executes them in this process; each is followed to its receipt."""
        plans = [shell_plan(snapshot_id, SLOW, f"submitted {i}") for i in range(2)]
        plan_ids = [embedded.probe_plan(plan=p).plan_id for p in plans]
        submitted = embedded.probe_submit(plan_ids=plan_ids, policy_id=POLICY_ID)
        states = {embedded.run_status(run_id=r).state for r in submitted.run_ids}
        assert states <= {"queued", "running"}
        outcomes = [_until_done(embedded, r).outcome for r in submitted.run_ids]
        assert outcomes == ["supports", "supports"]

    def test_an_unknown_policy_is_refused_before_a_run_row_exists(
        self, embedded: ProbeService, shared_store: Store, snapshot_id: str
    ) -> None:
        """A policy id the file lacks is refused at once (policy_error), and no run row is
        written for it."""
        plan = {**shell_plan(snapshot_id, "exit 0", "elsewhere"), "policy_id": "farm-only"}
        plan_id = embedded.probe_plan(plan=plan).plan_id
        with pytest.raises(PolicyError, match="no policy with id 'farm-only'"):
            embedded.probe_run(plan_id=plan_id, policy_id="farm-only", wait_seconds=5)
        with shared_store.reading() as conn:
            assert conn.execute(select(runs.c.run_id)).all() == []


@pytest.mark.redis
class TestQueued:
    def test_a_run_no_worker_took_stays_queued_and_pollable(
        self,
        shared_store: Store,
        policy_file: Path,
        redis_url: str,
        redis_namespace: str,
        snapshot_id: str,
    ) -> None:
        """Through the broker with no worker: the wait expires, the answer says queued, and
        the run keeps its place (it is not cancelled: a worker arriving later takes it)."""
        settings = read_settings(
            {"PROBE_REDIS_URL": redis_url, "PROBE_REDIS_NAMESPACE": redis_namespace}
        )
        with ProbeService(shared_store, settings=settings, policy_file=policy_file) as svc:
            plan_id = svc.probe_plan(plan=shell_plan(snapshot_id, "exit 0", "waits")).plan_id
            answer = svc.probe_run(plan_id=plan_id, policy_id=POLICY_ID, wait_seconds=0.5)
            assert isinstance(answer, RunStatus)
            assert (answer.state, answer.lease_expired) == ("queued", False)
            assert svc.run_status(run_id=answer.run_id).state == "queued"
            svc.run_cancel(run_id=answer.run_id)  # leave nothing for another test's worker
