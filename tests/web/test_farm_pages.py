"""What a CI farm reads on the web view: runs with their hypothesis, attempts and timing,
id prefixes in the filters, a batch page, a JUnit run's failing tests, a receipt link, and
runs in process on the farm page -- all as inert text (served over HTTP, stub scenario)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from markupsafe import escape

from probe_service.errors import NotFound
from probe_service.service import ProbeService

from .conftest import serving
from .scenario import HOSTILE_HYPOTHESIS, HOSTILE_MESSAGE, HOSTILE_TEST, Scenario
from .test_guard import fetch


@pytest.fixture(scope="module")
def url(service: ProbeService) -> Iterator[str]:
    """The view over the scenario."""
    with serving(service) as base:
        yield base


def _escaped(text: str) -> str:
    """``text`` as the templates' autoescaping writes it."""
    return str(escape(text))


def _page(url: str) -> str:
    status, _, body = fetch(url)
    assert status == 200, (url, status, body[:500])
    return body


class TestRunsList:
    def test_each_run_carries_its_plans_hypothesis(
        self, service: ProbeService, scenario: Scenario
    ) -> None:
        """run_list names each run by its plan's hypothesis, as the plan states it."""
        named = {r.run_id: r.hypothesis for r in service.run_list().runs}
        assert named[scenario.queue_runs["ok"]] == "ok.py exits 0"
        assert named[scenario.queue_runs["hostile"]] == HOSTILE_HYPOTHESIS
        assert named[scenario.process_run] == HOSTILE_HYPOTHESIS

    def test_columns_show_hypothesis_attempts_and_timing_escaped(
        self, url: str, scenario: Scenario
    ) -> None:
        """The list shows the hostile hypothesis as escaped text, with attempts and a
        submit-to-done time for queued runs."""
        body = _page(f"{url}/runs?batch_id={scenario.batch_id}")
        assert _escaped(HOSTILE_HYPOTHESIS) in body
        assert "<script>window.__pwned" not in body
        assert '<td class="num attempts">1</td>' in body
        assert body.count('<td class="num took">') == 3
        assert '<td class="num took">—</td>' not in body  # every queued run is done

    @pytest.mark.parametrize("field", ["run_id", "batch_id", "snapshot_id"])
    def test_an_id_prefix_filters_like_the_full_id(
        self, url: str, scenario: Scenario, field: str
    ) -> None:
        """An 8-hex prefix in a filter lists what the full id lists."""
        full = {
            "run_id": scenario.queue_runs["ok"],
            "batch_id": scenario.batch_id,
            "snapshot_id": scenario.snapshot_id,
        }[field]
        by_full = _page(f"{url}/runs?{field}={full}").count('<tr class="run">')
        by_prefix = _page(f"{url}/runs?{field}={full[:8]}").count('<tr class="run">')
        assert by_prefix == by_full > 0

    def test_a_prefix_matching_nothing_is_a_404_naming_the_field(self, url: str) -> None:
        """A prefix that names no batch is refused, as on every face."""
        status, _, body = fetch(f"{url}/runs?batch_id=00000000")
        assert status == 404
        assert "batch_id" in body


class TestBatchPage:
    def test_report_counts_failures_and_slowest(
        self, service: ProbeService, scenario: Scenario
    ) -> None:
        """batch_report counts the batch, lists its two failures in order and its runs by
        time taken, and refuses a batch that does not exist."""
        report = service.batch_report(batch_id=scenario.batch_id[:8])
        assert (report.batch_id, report.total, report.done) == (scenario.batch_id, 3, 3)
        assert report.counts == {"done": 3, "supports": 1, "refutes": 1, "inconclusive": 1}
        assert [r.run_id for r in report.failures] == [
            scenario.queue_runs["fail"],
            scenario.queue_runs["hostile"],
        ]
        assert report.failures_total == 2
        took = [r.took_ms for r in report.slowest]
        assert len(took) == 3
        assert took == sorted(took, reverse=True)  # type: ignore[type-var]
        assert (
            service.batch_report(batch_id=scenario.batch_id, limit=1).slowest[0].took_ms == took[0]
        )
        with pytest.raises(NotFound):
            service.batch_report(batch_id="0" * 32)

    def test_page_shows_progress_counts_and_failures_as_text(
        self, url: str, scenario: Scenario
    ) -> None:
        """The batch page shows 3/3 done, its counts, and its failures with the hostile
        hypothesis escaped."""
        body = _page(f"{url}/batches/{scenario.batch_id}")
        assert 'id="progress">3/3<' in body
        assert '<progress id="progress-bar" max="3" value="3">' in body
        assert f"/runs/{scenario.queue_runs['fail']}" in body
        assert _escaped(HOSTILE_HYPOTHESIS) in body
        assert "<script>" not in body

    def test_run_pages_link_their_batch_page(self, url: str, scenario: Scenario) -> None:
        """A queued run's page and the runs list link the batch page."""
        assert f'href="/batches/{scenario.batch_id}"' in _page(
            f"{url}/runs/{scenario.queue_runs['ok']}"
        )
        assert f'href="/batches/{scenario.batch_id}"' in _page(f"{url}/runs")


class TestJunitRun:
    def test_failing_tests_are_listed_with_their_messages_escaped(
        self, url: str, scenario: Scenario
    ) -> None:
        """A junit_xml run's page lists its failing test and message (the summary `run`
        prints), markup escaped."""
        body = _page(f"{url}/runs/{scenario.junit_run}")
        assert "2 tests: 1 passed, 1 failed, 0 error, 0 skipped" in body
        assert _escaped(f"tests.test_web::{HOSTILE_TEST}") in body
        assert _escaped(HOSTILE_MESSAGE) in body
        assert "<img" not in body
        assert "<script" not in body
        assert body.count('<tr class="failing-test">') == 1


class TestReceiptLinks:
    def test_a_receipt_address_leads_to_its_run(
        self, url: str, scenario: Scenario, service: ProbeService
    ) -> None:
        """/receipts/SHA answers a redirect to the page of the run that wrote it."""
        sha = service.receipt_get(receipt_id=scenario.queue_runs["ok"])["receipt_sha256"]
        status, headers, _ = fetch(f"{url}/receipts/{sha}")
        assert (status, headers["location"]) == (303, f"/runs/{scenario.queue_runs['ok']}")

    def test_claim_evidence_links_its_receipt(
        self, url: str, scenario: Scenario, service: ProbeService
    ) -> None:
        """The claim page links its evidence receipt's page."""
        sha = service.receipt_get(receipt_id=scenario.queue_runs["ok"])["receipt_sha256"]
        assert f'href="/receipts/{sha}"' in _page(f"{url}/claims/{scenario.claim_id}")


class TestFarmPage:
    def test_runs_in_process_count(self, url: str) -> None:
        """The farm page counts the run executed in a process among the finished runs."""
        body = _page(f"{url}/")
        assert 'id="in-process">1<' in body
        assert 'id="finished">5<' in body
