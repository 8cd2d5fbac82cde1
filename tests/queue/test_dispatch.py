"""The ``Queue`` seam: a broker or the embedded queue, chosen once from the settings, and
the refusals that used to be ``queue is None`` branches (docs/ARCHITECTURE.md, "Queue")."""

from __future__ import annotations

from pathlib import Path

import pytest

from probe_service.errors import InvalidInput
from probe_service.plans import parse_plan
from probe_service.queue import InlineQueue, ProbeQueue, open_queue, submit_plans
from probe_service.queue.runs import batch_counts
from probe_service.service import ProbeService
from probe_service.settings import read_settings
from probe_service.store import Store

from .conftest import POLICY_ID, shell_plan


@pytest.fixture
def embedded(shared_store: Store, monkeypatch: pytest.MonkeyPatch) -> ProbeService:
    """A session without PROBE_REDIS_URL (the embedded queue)."""
    monkeypatch.delenv("PROBE_REDIS_URL", raising=False)
    monkeypatch.delenv("ZYTE_AGENT_REDIS_URL", raising=False)
    return ProbeService(shared_store)


class TestChosenOnce:
    def test_a_redis_url_chooses_the_broker(self, redis_url: str, redis_namespace: str) -> None:
        """With PROBE_REDIS_URL the queue is the broker, in the settings' namespace."""
        settings = read_settings({"PROBE_REDIS_URL": redis_url, "PROBE_REDIS_NAMESPACE": "ns-x"})
        queue = open_queue(settings)
        try:
            assert isinstance(queue, ProbeQueue)
            assert (queue.embedded, queue.namespace) == (False, "ns-x")
            assert queue.require_broker("unused") is queue
        finally:
            queue.close()

    def test_no_redis_url_chooses_the_embedded_queue(self) -> None:
        """Without it the queue is the embedded one, in the settings' namespace."""
        queue = open_queue(read_settings({"PROBE_REDIS_NAMESPACE": "ns-y"}))
        assert isinstance(queue, InlineQueue)
        assert (queue.embedded, queue.namespace) == (True, "ns-y")

    def test_a_session_opens_the_queue_its_settings_name(self, shared_store: Store) -> None:
        """The session's queue follows its settings, not the process environment."""
        svc = ProbeService(shared_store, settings=read_settings({}))
        assert isinstance(svc.queue, InlineQueue)


class TestEmbedded:
    def test_a_submitted_batch_waits_in_the_store(
        self, shared_store: Store, snapshot_id: str
    ) -> None:
        """The embedded queue sends nothing: the runs stay queued until executed here."""
        queue = InlineQueue(read_settings({}))
        plan = parse_plan(shell_plan(snapshot_id, "exit 0", "waits"))
        submitted = submit_plans(shared_store, queue, [plan], POLICY_ID)
        assert submitted.enqueued == 0
        assert batch_counts(shared_store, submitted.batch_id).get("queued") == 1

    def test_batch_resume_without_a_farm_is_refused_as_before(
        self, embedded: ProbeService, shared_store: Store, snapshot_id: str
    ) -> None:
        """``batch_resume`` without a broker refuses with the same message, sending nothing."""
        plan = parse_plan(shell_plan(snapshot_id, "exit 0", "resume"))
        batch_id = submit_plans(shared_store, embedded.queue, [plan], POLICY_ID).batch_id
        with pytest.raises(
            InvalidInput, match=r"^batch_resume: needs a queue \(PROBE_REDIS_URL\)$"
        ):
            embedded.batch_resume(batch_id=batch_id)
        assert batch_counts(shared_store, batch_id).get("queued") == 1

    def test_probe_run_via_the_queue_without_one_is_refused(
        self, embedded: ProbeService, snapshot_id: str
    ) -> None:
        """``via: queue`` without a broker refuses with the same message; nothing runs."""
        plan_id = embedded.probe_plan(plan=shell_plan(snapshot_id, "exit 0", "via")).plan_id
        with pytest.raises(
            InvalidInput, match=r"^via: queue asked for, but no PROBE_REDIS_URL is configured$"
        ):
            embedded.probe_run(plan_id=plan_id, policy_id=POLICY_ID, via="queue")

    def test_the_cli_resume_without_a_farm_is_refused_as_before(
        self,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
        tmp_path: Path,
    ) -> None:
        """``submit --resume`` without PROBE_REDIS_URL: the same one line, exit 3."""
        from probe_service.cli import main

        monkeypatch.delenv("PROBE_REDIS_URL", raising=False)
        code = main(["submit", "--resume", "a" * 32, "--root", str(tmp_path)])
        assert code == 3
        assert capsys.readouterr().err == "byte-probe: error: --resume needs PROBE_REDIS_URL\n"

    def test_the_worker_without_a_broker_is_refused_as_before(
        self,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
        tmp_path: Path,
    ) -> None:
        """``byte-probe worker`` without PROBE_REDIS_URL: the same one line, no store made."""
        from probe_service.cli import main

        monkeypatch.delenv("PROBE_REDIS_URL", raising=False)
        code = main(["worker", "--root", str(tmp_path / "state")])
        assert code == 3
        assert capsys.readouterr().err == (
            "byte-probe: error: PROBE_REDIS_URL: not set; a worker needs a Redis broker\n"
        )
        assert not (tmp_path / "state").exists()

    def test_the_worker_with_more_lanes_than_threads_is_refused(
        self,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
        tmp_path: Path,
    ) -> None:
        """``byte-probe worker --threads 2 --lanes 3``: one line naming both flags, before
        any store or worker process (each would refuse it again, and be restarted)."""
        from probe_service.cli import main

        monkeypatch.setenv("PROBE_REDIS_URL", "redis://127.0.0.1:1/0")
        argv = ["worker", "--threads", "2", "--lanes", "3", "--root", str(tmp_path / "state")]
        code = main(argv)
        assert code == 3  # the CLI's code for invalid input
        assert capsys.readouterr().err == (
            "byte-probe: error: --lanes: 3 exceeds --threads 2; no thread could use it\n"
        )
        assert not (tmp_path / "state").exists()
