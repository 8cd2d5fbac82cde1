"""``obligation_recheck`` through the Python API, with real sandboxed reruns
(docs/ARCHITECTURE.md, "Recheck").

A recheck reruns the plan of the receipt a claim rests on with only ``snapshot_id``
changed, under the same policy, as one batch; the batch settles when its last run is
done: every rerun agrees -> ``rechecked``, else the obligation stays open naming the
receipt. The Python API returns at once with the batch id; ``batch_status`` polls it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from probe_service.claims import settle_recheck, store_receipts
from probe_service.claims.tables import obligation_resolutions, recheck_settlements
from probe_service.plans.execution import RuntimeBackend
from probe_service.policies import POLICY_FILE_ENV
from probe_service.queue import WorkerContext, batch_counts, batch_results, execute_run
from probe_service.sandbox import SandboxRuntime
from probe_service.service import ProbeService
from probe_service.settings import read_settings
from probe_service.store import Store

from ..faces.drivers import PythonDriver
from ..rechecking import (
    BROKEN,
    EDITED,
    POLICY_ID,
    SCOPE,
    STATEMENT,
    capture,
    claim_doc,
    claim_on_receipt,
    ok,
    settled,
    write_policy,
)

pytestmark = pytest.mark.sandbox


@pytest.fixture
def policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runtime: SandboxRuntime) -> Path:
    """The policy file the session reads (``runtime`` fails the test without a sandbox)."""
    path = write_policy(tmp_path / "policies.json")
    monkeypatch.setenv(POLICY_FILE_ENV, str(path))
    return path


@pytest.fixture
def driver(sqlite_store: Store, policy: Path) -> Iterator[PythonDriver]:
    """The Python API over the embedded store (runs execute in this process)."""
    with ProbeService(sqlite_store) as svc:
        yield PythonDriver(svc)


def _open(driver: PythonDriver, snapshot: str) -> list[dict[str, Any]]:
    found = ok(driver.call("obligation_list", {"snapshot_id": snapshot, "state": "open"}))
    return list(found["obligations"])


class TestRecheck:
    def test_rerun_of_the_receipt_plan_resolves_rechecked(
        self, driver: PythonDriver, tmp_path: Path
    ) -> None:
        """A sweep reruns the receipt's plan with only snapshot_id changed, under the same
        policy; the agreeing rerun resolves the obligation rechecked and the gate passes."""
        repo = tmp_path / "repo"
        _, receipt, claim_id = claim_on_receipt(driver, repo)
        after = capture(driver, repo, EDITED)
        # A prefix of the snapshot goes through the one id resolver.
        started = ok(driver.call("obligation_recheck", {"snapshot_id": after[:12]}))
        assert started["snapshot_id"] == after
        assert started["settled"] is False
        (entry,) = started["entries"]
        assert (entry["claim_id"], entry["status"], entry["statement"]) == (
            claim_id,
            "queued",
            STATEMENT,
        )
        (rerun,) = entry["reruns"]
        assert (rerun["evidence_kind"], rerun["evidence"]) == ("receipt", receipt)
        assert rerun["policy_id"] == POLICY_ID
        stored = ok(driver.call("probe_get", {"plan_id": rerun["plan_id"]}))["plan"]
        original = ok(driver.call("receipt_get", {"receipt_id": receipt}))["committed"]
        assert stored == {**original["plan"], "snapshot_id": after}
        assert original["plan"]["snapshot_id"] != after
        status = settled(driver, started["batch_id"])
        (done,) = status["recheck"]["entries"]
        assert done["status"] == "rechecked"
        (ran,) = done["reruns"]
        assert (ran["outcome"], ran["agrees"]) == ("supports", True)
        assert ran["receipt_sha256"] != receipt
        resolved = ok(driver.call("obligation_list", {"snapshot_id": after}))["obligations"]
        assert [(o["resolution"], o["receipt"]) for o in resolved] == [
            ("rechecked", ran["receipt_sha256"])
        ]
        assert ok(driver.call("gate", {"snapshot_id": after, "scope": SCOPE}))["passed"]

    def test_a_disagreeing_rerun_leaves_the_obligation_open_naming_it(
        self, driver: PythonDriver, tmp_path: Path
    ) -> None:
        """A rerun that refutes a supported claim resolves nothing: the obligation stays
        open, the report and the gate name the receipt and the next step."""
        repo = tmp_path / "repo"
        claim_on_receipt(driver, repo)
        broken = capture(driver, repo, BROKEN)
        started = ok(driver.call("obligation_recheck", {"snapshot_id": broken, "scope": SCOPE}))
        status = settled(driver, started["batch_id"])
        (entry,) = status["recheck"]["entries"]
        (rerun,) = entry["reruns"]
        assert entry["status"] == "disagreed"
        assert (rerun["outcome"], rerun["agrees"]) == ("refutes", False)
        assert rerun["receipt_sha256"] in rerun["why"]
        assert "superseding" in entry["next"]
        (still,) = _open(driver, broken)
        assert still["obligation_id"] == entry["obligation_id"]
        gate = ok(driver.call("gate", {"snapshot_id": broken, "scope": SCOPE}))
        assert not gate["passed"]
        hint = gate["entries"][0]["recheck"]
        assert rerun["receipt_sha256"] in hint["disagreed"]
        assert "superseding" in hint["next"]

    def test_a_claim_without_rerunnable_evidence_needs_a_person(
        self, driver: PythonDriver, tmp_path: Path
    ) -> None:
        """A sweep queues the claims it can rerun and lists the one resting on a span only
        as needing a person or an agent, with what it rests on; that one stays open."""
        repo = tmp_path / "repo"
        before, _, _ = claim_on_receipt(driver, repo)
        span = {"span": {"path": "src/parse.py", "start": 0, "end": 16}}
        spanned = ok(
            driver.call(
                "claim_create",
                {"claim": {**claim_doc(before, [span]), "statement": "parse is short"}},
            )
        )
        after = capture(driver, repo, EDITED)
        started = ok(driver.call("obligation_recheck", {"snapshot_id": after, "scope": SCOPE}))
        by_claim = {e["claim_id"]: e for e in started["entries"]}
        person = by_claim[spanned["claim_id"]]
        assert person["status"] == "needs_person"
        assert person["reruns"] == []
        assert any(r.startswith("span src/parse.py bytes 0-16") for r in person["rests_on"])
        assert "obligations resolve" in person["next"]
        status = settled(driver, started["batch_id"])
        assert [e["status"] for e in status["recheck"]["entries"]] == ["rechecked"]
        assert [o["claim_id"] for o in _open(driver, after)] == [spanned["claim_id"]]

    def test_a_second_recheck_reruns_nothing_already_resolved(
        self, driver: PythonDriver, tmp_path: Path
    ) -> None:
        """Once settled, rechecking the snapshot again queues nothing: no batch, no run."""
        repo = tmp_path / "repo"
        claim_on_receipt(driver, repo)
        after = capture(driver, repo, EDITED)
        first = ok(driver.call("obligation_recheck", {"snapshot_id": after}))
        settled(driver, first["batch_id"])
        again = ok(driver.call("obligation_recheck", {"snapshot_id": after}))
        assert (again["batch_id"], again["entries"], again["settled"]) == (None, [], True)


class TestSettlingOnce:
    def test_concurrent_settlers_resolve_once(
        self, pg_store: Store, policy: Path, tmp_path: Path, runtime: SandboxRuntime
    ) -> None:
        """Eight threads settling the same finished batch on PostgreSQL write one
        settlement and one resolution, and all report the same verdict."""
        repo = tmp_path / "repo"
        # Runs of this session are executed below by hand, with no settlement after them.
        with ProbeService(pg_store) as svc:
            driver = PythonDriver(svc)
            claim_on_receipt(driver, repo)
            after = capture(driver, repo, EDITED)
            inert = _NoStart(svc)
            started = ok(driver.call("obligation_recheck", {"snapshot_id": after}))
            assert inert.started == 1
        batch_id = started["batch_id"]
        ctx = WorkerContext(
            store=pg_store,
            backend=RuntimeBackend(runtime),
            settings=read_settings(),
            after_run=_no_followup,
        )
        for run in batch_results(pg_store, batch_id):
            execute_run(ctx, run.run_id)
        assert batch_counts(pg_store, batch_id)["done"] == 1
        assert _count(pg_store, recheck_settlements) == 0
        barrier = threading.Barrier(8)
        reports: list[Any] = []

        def settle() -> None:
            runs = batch_results(pg_store, batch_id)
            barrier.wait()
            reports.append(
                settle_recheck(
                    pg_store, batch_id, runs, store_receipts(pg_store), settled_by="test"
                )
            )

        threads = [threading.Thread(target=settle) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(reports) == 8
        assert {r.entries[0].status for r in reports} == {"rechecked"}
        assert _count(pg_store, recheck_settlements) == 1
        assert _count(pg_store, obligation_resolutions) == 1


class _NoStart:
    """Keeps a session's queue from starting the runs it was handed (counts the calls)."""

    def __init__(self, svc: ProbeService) -> None:
        self.started = 0
        queue = svc.queue

        def start(*_: object) -> None:
            self.started += 1

        queue.start = start  # type: ignore[method-assign]


def _no_followup(store: Store, run_id: str, owner: str) -> None:
    """A context that leaves every settlement to the test."""


def _count(store: Store, table: Any) -> int:
    with store.reading() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())
