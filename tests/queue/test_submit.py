"""Bulk submission: reading plan files, persisting and enqueueing, resuming, JUnit."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import pytest
from sqlalchemy import func, select

from probe_service.errors import InvalidPlan
from probe_service.plans import Plan, parse_plan, save_plan
from probe_service.queue import (
    InlineQueue,
    ProbeQueue,
    RunSummary,
    read_plans_file,
    resume_batch,
    submit_plans,
)
from probe_service.queue.junit import write_junit
from probe_service.queue.runs import claim_run, finish_run
from probe_service.queue.submit import BATCH_SIZE
from probe_service.queue.tables import runs
from probe_service.settings import read_settings
from probe_service.store import Store

from .conftest import POLICY_ID, shell_plan


def _write_lines(path: Path, lines: list[Any]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _stored_runs(store: Store) -> int:
    with store.reading() as conn:
        return int(conn.execute(select(func.count()).select_from(runs)).scalar_one())


@pytest.fixture
def queue(redis_url: str, redis_namespace: str) -> Iterator[ProbeQueue]:
    """A sender on a fresh Redis namespace."""
    sender = ProbeQueue(redis_url, namespace=redis_namespace)
    yield sender
    sender.close()


class TestReadPlansFile:
    def test_invalid_lines_are_reported_by_number(self, snapshot_id: str, tmp_path: Path) -> None:
        """Every bad line is named with its line number, and the whole file is refused."""
        good = shell_plan(snapshot_id, "exit 0", "good")
        path = tmp_path / "plans.jsonl"
        path.write_text(json.dumps(good) + "\nnot json\n" + json.dumps({"x": 1}) + "\n")
        with pytest.raises(InvalidPlan, match=r"2 invalid line\(s\).*line 2: .*line 3: "):
            read_plans_file(path, POLICY_ID)

    def test_skip_invalid_keeps_the_valid_lines(self, snapshot_id: str, tmp_path: Path) -> None:
        """With skip_invalid the valid plans come back and the bad lines are listed."""
        good = shell_plan(snapshot_id, "exit 0", "good")
        path = tmp_path / "plans.jsonl"
        path.write_text(json.dumps(good) + "\n{broken\n")
        items, errors = read_plans_file(path, POLICY_ID, skip_invalid=True)
        assert items == [parse_plan(good)]
        assert len(errors) == 1
        assert errors[0].startswith("line 2: ")

    def test_plan_id_lines_are_returned_as_ids(self, tmp_path: Path) -> None:
        """A JSON string of 64 hex digits is a reference to a stored plan."""
        path = _write_lines(tmp_path / "ids.jsonl", ["a" * 64])
        items, _ = read_plans_file(path, POLICY_ID)
        assert items == ["a" * 64]

    def test_malformed_plan_id_is_refused(self, tmp_path: Path) -> None:
        """A string line that is not a plan id is an invalid line."""
        path = _write_lines(tmp_path / "ids.jsonl", ["not-a-plan-id"])
        with pytest.raises(InvalidPlan, match=r"line 1: .*is not a plan id"):
            read_plans_file(path, POLICY_ID)

    def test_policy_mismatch_is_refused(self, snapshot_id: str, tmp_path: Path) -> None:
        """A plan whose policy_id differs from --policy is an invalid line."""
        other = {**shell_plan(snapshot_id, "exit 0", "other"), "policy_id": "other-policy"}
        path = _write_lines(tmp_path / "plans.jsonl", [other])
        with pytest.raises(InvalidPlan, match="line 1: policy_id: 'other-policy' differs"):
            read_plans_file(path, POLICY_ID)


class TestSubmitPlans:
    def test_stored_plan_ids_are_submitted(self, shared_store: Store, snapshot_id: str) -> None:
        """A plan referenced by id runs as that plan."""
        plan = parse_plan(shell_plan(snapshot_id, "exit 0", "by id"))
        plan_id, _ = save_plan(shared_store, plan)
        result = submit_plans(shared_store, InlineQueue(read_settings()), [plan_id], POLICY_ID)
        with shared_store.reading() as conn:
            stored = conn.execute(select(runs.c.plan_id)).scalars().all()
        assert stored == [plan_id]
        assert result.enqueued == 0

    def test_unknown_plan_id_is_refused(self, shared_store: Store, queue: ProbeQueue) -> None:
        """A plan id the store does not hold refuses the submission: nothing stored or sent."""
        with pytest.raises(InvalidPlan, match="not stored"):
            submit_plans(shared_store, queue, ["b" * 64], POLICY_ID)
        assert (_stored_runs(shared_store), queue.depth()) == (0, 0)

    def test_unknown_plan_id_past_the_first_chunk_stores_nothing(
        self, shared_store: Store, snapshot_id: str, queue: ProbeQueue
    ) -> None:
        """An unknown plan id after the first persisted chunk still leaves no run behind."""
        items: list[Plan | str] = [
            parse_plan(shell_plan(snapshot_id, f"exit 0 # {i}", f"chunk {i}"))
            for i in range(BATCH_SIZE)
        ]
        items.append("c" * 64)
        with pytest.raises(InvalidPlan, match="not stored"):
            submit_plans(shared_store, queue, items, POLICY_ID)
        # A stored queued run would be sent later by the janitor: none may exist.
        assert (_stored_runs(shared_store), queue.depth()) == (0, 0)

    def test_thousand_plans_are_stored_and_enqueued(
        self, shared_store: Store, snapshot_id: str, queue: ProbeQueue
    ) -> None:
        """1,000 plans become 1,000 stored runs and 1,000 messages in Redis."""
        items: list[Plan | str] = [
            parse_plan(shell_plan(snapshot_id, f"exit 0 # {i}", f"bulk {i}")) for i in range(1000)
        ]
        result = submit_plans(shared_store, queue, items, POLICY_ID)
        assert (len(result.run_ids), result.enqueued) == (1000, 1000)
        assert _stored_runs(shared_store) == 1000
        assert queue.depth() == 1000


class TestResumeBatch:
    def test_only_queued_runs_are_resent(
        self,
        shared_store: Store,
        snapshot_id: str,
        queue: ProbeQueue,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """Resuming sends the batch's queued runs, not its running or done ones."""
        items: list[Plan | str] = [
            parse_plan(shell_plan(snapshot_id, f"exit {i}", f"resume {i}")) for i in range(3)
        ]
        # Stored with no broker, by this deployment (the queue's namespace).
        monkeypatch.setenv("PROBE_REDIS_NAMESPACE", queue.namespace)
        result = submit_plans(shared_store, InlineQueue(read_settings()), items, POLICY_ID)
        running, done, queued = result.run_ids
        claim_run(shared_store, running, "worker-a", 60_000, namespace=queue.namespace)
        claim_run(shared_store, done, "worker-a", 60_000, namespace=queue.namespace)
        finish_run(
            shared_store,
            done,
            outcome="supports",
            reason="oracle_passed",
            receipt_sha256=None,
            action_key=None,
        )
        assert resume_batch(shared_store, queue, result.batch_id) == 1
        assert queue.depth() == 1
        with shared_store.reading() as conn:
            enqueued = (
                conn.execute(select(runs.c.run_id).where(runs.c.enqueued_ms.is_not(None)))
                .scalars()
                .all()
            )
        assert enqueued == [queued]


def _summary(seq: int, outcome: str, reason: str) -> RunSummary:
    return RunSummary(
        run_id=f"run{seq}",
        seq=seq,
        plan_id=f"{seq}" * 64,
        name=f"plan {seq}",
        state="done",
        outcome=outcome,
        reason=reason,
        receipt_sha256=f"{seq + 5}" * 64,
    )


class TestJunit:
    @pytest.fixture
    def suite(self, tmp_path: Path) -> ET.Element:
        """A written and re-parsed report of one supports, one refutes, one inconclusive."""
        path = tmp_path / "probes.xml"
        results = [
            _summary(1, "supports", "oracle_passed"),
            _summary(2, "refutes", "oracle_failed"),
            _summary(3, "inconclusive", "timeout"),
        ]
        write_junit(path, "b1", results)
        suite = ET.parse(path).getroot().find("testsuite")  # noqa: S314 - our own file
        assert suite is not None
        return suite

    def test_one_testcase_per_plan(self, suite: ET.Element) -> None:
        """Each run is one testcase named after its plan, and the counts say so."""
        names = [case.get("name") for case in suite.iter("testcase")]
        assert names == ["plan 1", "plan 2", "plan 3"]
        assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "1", "1")

    def test_supports_passes(self, suite: ET.Element) -> None:
        """A supported plan's testcase has neither failure nor error."""
        case = suite.findall("testcase")[0]
        assert case.find("failure") is None
        assert case.find("error") is None

    def test_refutes_is_a_failure_naming_reason_and_receipt(self, suite: ET.Element) -> None:
        """A refuted plan fails, with its reason and receipt id in the message."""
        failure = suite.findall("testcase")[1].find("failure")
        assert failure is not None
        assert "oracle_failed" in failure.get("message", "")
        assert "7" * 64 in failure.get("message", "")

    def test_inconclusive_is_an_error_naming_reason_and_receipt(self, suite: ET.Element) -> None:
        """An inconclusive plan is an error, with its reason and receipt id in the message."""
        error = suite.findall("testcase")[2].find("error")
        assert error is not None
        assert error.get("type") == "inconclusive"
        assert "timeout" in error.get("message", "")
        assert "8" * 64 in error.get("message", "")
