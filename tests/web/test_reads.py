"""The web view's read-only rows of the operation table, on a real scenario."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import func, select

from probe_service.claims.tables import claim_audit, claim_checks, obligations
from probe_service.errors import InvalidInput, NotFound
from probe_service.service import ProbeService
from probe_service.service.registry import operations
from probe_service.store.events import publish_events
from probe_service.store.schema import events

from .conftest import serving
from .scenario import POLICY_ID, Scenario
from .test_guard import fetch


def test_faces_of_the_new_rows() -> None:
    """run_list, claim_history and gate_preview reach MCP; farm_stats and files do not."""
    mcp = {op.name for op in operations("mcp")}
    host = {op.name for op in operations("host")}
    assert {"run_list", "claim_history", "gate_preview"} <= mcp
    assert not {"farm_stats", "snapshot_file"} & mcp
    assert host >= WEB_ROWS


#: The rows the web view may call: each one only reads (docs/ARCHITECTURE.md, "Web view").
WEB_ROWS = {
    "run_list",
    "farm_stats",
    "batch_report",
    "claim_history",
    "gate_preview",
    "snapshot_file",
    "snapshot_get",
    "probe_get",
    "receipt_get",
    "receipt_verify",
    "claim_show",
    "obligation_list",
    "review_list",
    "policy_list",
    "policy_describe",
    "run_status",
    "turn_list",
}


def test_the_web_face_offers_exactly_the_read_only_rows() -> None:
    """The ``web`` face label reaches the read-only rows and nothing else."""
    assert {op.name for op in operations("web")} == WEB_ROWS


def test_a_web_session_refuses_every_other_row(tmp_path: Path) -> None:
    """A session on the web face cannot call a row that writes or runs anything."""
    with ProbeService.open(tmp_path, interface="web", lazy=True) as svc:
        for name in ("probe_run", "claim_create", "snapshot_capture", "gate", "capabilities"):
            with pytest.raises(InvalidInput, match="unknown operation"):
                svc.call(name, {})


def test_run_list_filters(service: ProbeService, scenario: Scenario) -> None:
    """Each filter narrows the merged list of queued runs and runs in process."""
    assert len(service.run_list().runs) == 5
    assert {r.run_id for r in service.run_list(batch_id=scenario.batch_id).runs} == set(
        scenario.queue_runs.values()
    )
    assert [r.run_id for r in service.run_list(outcome="refutes").runs] == [
        scenario.queue_runs["fail"]
    ]
    assert len(service.run_list(reason="model_inferred_oracle").runs) == 2
    assert len(service.run_list(policy_id=POLICY_ID).runs) == 5
    assert len(service.run_list(policy_id="other").runs) == 0
    assert len(service.run_list(snapshot_id=scenario.snapshot_id).runs) == 5
    assert len(service.run_list(snapshot_id=scenario.changed_snapshot_id).runs) == 0
    assert service.run_list(state="queued").runs == []
    sources = {r.source for r in service.run_list().runs}
    assert sources == {"queue", "process"}


def test_run_list_pages_by_cursor(service: ProbeService) -> None:
    """Pages of one cover every run once, newest first; a forged cursor is refused."""
    seen, cursor = [], None
    while True:
        page = service.run_list(limit=1, cursor=cursor)
        seen += [(r.at_ms, r.run_id) for r in page.runs]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert len(seen) == 5
    assert seen == sorted(seen, reverse=True)
    with pytest.raises(InvalidInput, match="cursor"):
        service.run_list(cursor="x-'; drop table runs")
    with pytest.raises(InvalidInput, match="cursor"):
        service.run_list(cursor="9" * 16 + "-" + "a" * 32)  # a time past any calendar
    with pytest.raises(InvalidInput, match="limit"):
        service.call("run_list", {"limit": 501})


def test_farm_stats_counts_the_farm(service: ProbeService) -> None:
    """Four queued runs and one run in process finished in the window; each counts in the
    outcomes and the throughput, and the queued ones have a latency."""
    stats = service.farm_stats()
    assert stats.by_state == {"done in window": 5}
    assert stats.queue_depth == 0
    assert stats.outcomes == {"inconclusive": 3, "refutes": 1, "supports": 1}
    assert sum(b.finished for b in stats.buckets) == 5
    assert sum(b.in_process for b in stats.buckets) == 1
    assert any(b.latency_max_ms is not None and b.latency_max_ms >= 0 for b in stats.buckets)
    assert stats.in_process_in_window == 1
    assert stats.workers


def test_claim_history_and_gate_preview_write_nothing(
    service: ProbeService, scenario: Scenario
) -> None:
    """The history lists the check and the open obligation; the preview says fail, and
    neither adds a check, an obligation, an audit entry or an event."""

    def counts() -> list[int]:
        with service.store.reading() as conn:
            publish_events(conn)  # an event still in PostgreSQL's outbox counts too
            return [
                conn.execute(select(func.count()).select_from(t)).scalar_one()
                for t in (claim_checks, obligations, claim_audit, events)
            ]

    before = counts()
    history = service.claim_history(claim_id=scenario.claim_id)
    assert [o.state for o in history.obligations] == ["open"]
    assert history.checks[0].state == "needs_recheck"
    assert {a.operation for a in history.audit} >= {"claim_create"}
    preview = service.gate_preview(snapshot_id=scenario.changed_snapshot_id, scope="web")
    assert not preview.would_pass
    assert preview.checked == 1
    assert service.gate_preview(snapshot_id=scenario.snapshot_id, scope="web").would_pass
    assert counts() == before
    with pytest.raises(NotFound):
        service.claim_history(claim_id="clm_" + "0" * 32)


def test_snapshot_file_is_bounded(service: ProbeService, scenario: Scenario) -> None:
    """max_bytes cuts the content and says so; a path outside the snapshot is NotFound."""
    found = service.snapshot_file(snapshot_id=scenario.snapshot_id, entry="ok.py", max_bytes=5)
    assert found.text == "print"
    assert found.truncated
    assert found.size > 5
    with pytest.raises(NotFound):
        service.snapshot_file(snapshot_id=scenario.snapshot_id, entry="../etc/passwd")
    with pytest.raises(InvalidInput, match="max_bytes"):
        service.call(
            "snapshot_file",
            {"snapshot_id": scenario.snapshot_id, "entry": "ok.py", "max_bytes": 2_000_000},
        )


def test_a_refuted_runs_page_says_whether_it_was_confirmed(
    service: ProbeService, scenario: Scenario
) -> None:
    """A refutation's page shows its confirmation (docs/ARCHITECTURE.md, "Confirming a
    refutation"): run inline, so executed twice in the same process."""
    with serving(service) as url:
        status, _, body = fetch(f"{url}/runs/{scenario.queue_runs['fail']}")
    assert status == 200
    assert "confirmed · same_worker · refutes · oracle_failed" in body
