"""Asynchronous runs: ``probe_run`` waits at most ``wait_seconds`` and answers with the run's
status (its id to poll) when the run is not done; ``probe_submit`` and ``run_status`` follow
runs to their receipt (docs/ARCHITECTURE.md, "Asynchronous runs").

Nothing here races a clock. A run that must still be going when the answer comes executes
through the stub sandbox held at a gate the test opens only after the answer (these tests
are about waiting, not about running a probe: the MCP loop in tests/faces runs the real
sandbox); the waits are 0, and every wait for the end is a bounded poll
(``BATCH_DEADLINE_S``, a liveness bound), never a threshold.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from probe_service.errors import PolicyError
from probe_service.plans import Plan, verify_receipt
from probe_service.queue import RunStatus
from probe_service.queue.tables import runs
from probe_service.service import ProbeService
from probe_service.settings import read_settings
from probe_service.store import Store
from tests.stubsandbox import Canned, StubSandbox

from .conftest import BATCH_DEADLINE_S, POLICY_ID, shell_plan


class Gate:
    """A stub answer that holds each execution until the test opens the gate."""

    def __init__(self) -> None:
        self.opened = threading.Event()
        #: Set once an execution reached the gate (it is running, not queued).
        self.reached = threading.Event()

    def __call__(self, plan: Plan) -> Canned:
        self.reached.set()
        if not self.opened.wait(BATCH_DEADLINE_S):
            raise AssertionError("the gate was never opened")
        return Canned(exit_code=0, stdout=b"let through\n")


def _until_done(svc: ProbeService, run_id: str) -> RunStatus:
    """Poll run_status (by an 8-hex prefix) until the run is done, within the deadline."""
    deadline = time.monotonic() + BATCH_DEADLINE_S
    while True:
        status = svc.run_status(run_id=run_id[:8])
        if status.state == "done" or time.monotonic() > deadline:
            return status
        time.sleep(0.1)


@pytest.fixture
def gate() -> Iterator[Gate]:
    """A closed gate, opened at the end whatever the test did (no thread is left held)."""
    held = Gate()
    yield held
    held.opened.set()


@pytest.fixture
def gated(shared_store: Store, policy_file: Path, gate: Gate) -> Iterator[ProbeService]:
    """A session without a broker whose runs execute through the gated stub."""
    svc = ProbeService(
        shared_store,
        settings=read_settings({}),
        policy_file=policy_file,
        backend=StubSandbox(gate),
    )
    yield svc
    gate.opened.set()
    svc.embedded_queue.close()  # closing the store is the shared fixture's


class TestEmbedded:
    def test_a_run_not_done_answers_its_status_and_goes_on(
        self, gated: ProbeService, gate: Gate, snapshot_id: str
    ) -> None:
        """The wait expires (0 s, the run held at the gate): the answer is the run's status
        with its id; polling it after the gate opens gives the result, receipt included."""
        plan_id = gated.probe_plan(plan=shell_plan(snapshot_id, "exit 0", "held")).plan_id
        answer = gated.probe_run(plan_id=plan_id, policy_id=POLICY_ID, wait_seconds=0)
        assert isinstance(answer, RunStatus)
        assert answer.state in ("queued", "running")
        assert answer.result is None
        assert "poll run_status" in answer.next
        gate.opened.set()
        done = _until_done(gated, answer.run_id)
        assert done.state == "done"
        assert done.result is not None
        assert (done.outcome, done.result.stdout) == ("supports", "let through\n")
        assert verify_receipt(done.result.receipt) == done.receipt_sha256

    def test_a_run_held_is_reported_running(
        self, gated: ProbeService, gate: Gate, snapshot_id: str
    ) -> None:
        """Once its execution started, run_status says running (no result), not queued."""
        plan_id = gated.probe_plan(plan=shell_plan(snapshot_id, "exit 0", "running")).plan_id
        answer = gated.probe_run(plan_id=plan_id, policy_id=POLICY_ID, wait_seconds=0)
        assert isinstance(answer, RunStatus)
        assert gate.reached.wait(BATCH_DEADLINE_S)
        status = gated.run_status(run_id=answer.run_id)
        assert (status.state, status.result, status.lease_expired) == ("running", None, False)

    def test_closing_the_session_never_abandons_a_run(
        self, shared_store: Store, policy_file: Path, gate: Gate, snapshot_id: str
    ) -> None:
        """A session closed while its run is held waits for it: once close returns the
        receipt is written, and another session over the store reads it."""
        first = ProbeService(
            shared_store,
            settings=read_settings({}),
            policy_file=policy_file,
            backend=StubSandbox(gate),
        )
        plan_id = first.probe_plan(plan=shell_plan(snapshot_id, "exit 0", "closing")).plan_id
        answer = first.probe_run(plan_id=plan_id, policy_id=POLICY_ID, wait_seconds=0)
        assert isinstance(answer, RunStatus)
        assert gate.reached.wait(BATCH_DEADLINE_S)  # held: it cannot be done yet
        gate.opened.set()
        first.embedded_queue.close()  # what closing the session does before the store
        later = ProbeService(shared_store, settings=read_settings({}))
        status = later.run_status(run_id=answer.run_id)
        assert (status.state, status.outcome) == ("done", "supports")

    def test_submit_returns_at_once_and_the_runs_execute_here(
        self, gated: ProbeService, gate: Gate, snapshot_id: str
    ) -> None:
        """probe_submit without a broker answers with the run ids while the runs are held,
        and executes them in this process; each is followed to its receipt."""
        plans = [shell_plan(snapshot_id, "exit 0", f"submitted {i}") for i in range(2)]
        plan_ids = [gated.probe_plan(plan=p).plan_id for p in plans]
        submitted = gated.probe_submit(plan_ids=plan_ids, policy_id=POLICY_ID)
        states = {gated.run_status(run_id=r).state for r in submitted.run_ids}
        assert states <= {"queued", "running"}
        gate.opened.set()
        outcomes = [_until_done(gated, r).outcome for r in submitted.run_ids]
        assert outcomes == ["supports", "supports"]

    def test_an_unknown_policy_is_refused_before_a_run_row_exists(
        self, gated: ProbeService, shared_store: Store, snapshot_id: str
    ) -> None:
        """A policy id the file lacks is refused at once by probe_run and probe_submit
        (policy_error naming policy_id), and no run row is written for it."""
        plan = {**shell_plan(snapshot_id, "exit 0", "elsewhere"), "policy_id": "farm-only"}
        plan_id = gated.probe_plan(plan=plan).plan_id
        with pytest.raises(PolicyError, match="policy_id: no policy with id 'farm-only'"):
            gated.probe_run(plan_id=plan_id, policy_id="farm-only", wait_seconds=0)
        with pytest.raises(PolicyError, match="policy_id: no policy with id 'farm-only'"):
            gated.probe_submit(plan_ids=[plan_id], policy_id="farm-only")
        with shared_store.reading() as conn:
            assert conn.execute(select(runs.c.run_id)).all() == []


@pytest.mark.sandbox
def test_a_run_done_within_the_wait_answers_its_result(
    shared_store: Store, policy_file: Path, snapshot_id: str
) -> None:
    """On the real sandbox, a run done within its wait (a liveness bound) is answered with
    the result itself, as before, and its receipt verifies."""
    with ProbeService(shared_store, settings=read_settings({}), policy_file=policy_file) as svc:
        plan_id = svc.probe_plan(plan=shell_plan(snapshot_id, "exit 0", "quick")).plan_id
        wait = BATCH_DEADLINE_S
        answer = svc.probe_run(plan_id=plan_id, policy_id=POLICY_ID, wait_seconds=wait)
        assert not isinstance(answer, RunStatus)
        assert answer.outcome == "supports"
        assert verify_receipt(answer.receipt) == answer.receipt_sha256


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
        """Through the broker with no worker on its namespace: the wait (0 s) expires, the
        answer says queued, and the run keeps its place (not cancelled: a worker arriving
        later takes it)."""
        settings = read_settings(
            {"PROBE_REDIS_URL": redis_url, "PROBE_REDIS_NAMESPACE": redis_namespace}
        )
        with ProbeService(shared_store, settings=settings, policy_file=policy_file) as svc:
            plan_id = svc.probe_plan(plan=shell_plan(snapshot_id, "exit 0", "waits")).plan_id
            answer = svc.probe_run(plan_id=plan_id, policy_id=POLICY_ID, wait_seconds=0)
            assert isinstance(answer, RunStatus)
            assert (answer.state, answer.lease_expired) == ("queued", False)
            assert svc.run_status(run_id=answer.run_id).state == "queued"
            svc.run_cancel(run_id=answer.run_id)  # leave nothing for another test's worker
