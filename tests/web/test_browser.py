"""The web view in a real browser: Debian's chromium driven by Playwright (never a
downloaded browser) against a store filled by a real sandboxed scenario."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import pytest
from playwright.sync_api import sync_playwright

from .conftest import filled
from .scenario import HOSTILE, HOSTILE_HYPOTHESIS, HOSTILE_MESSAGE, HOSTILE_TEST, Scenario

pytestmark = [pytest.mark.slow, pytest.mark.browser]

CHROMIUM = "/usr/bin/chromium"
#: Screenshots land here and stay after the run, for a person to look at.
ARTIFACTS = Path(os.environ.get("BYTE_PROBE_TEST_ARTIFACTS", "/tmp/byte-probe-test-artifacts"))


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory, runtime: object) -> Iterator[Scenario]:
    """The scenario, its probes run for real in the sandbox (the web face's end-to-end run)."""
    with filled(tmp_path_factory, None) as done:
        yield done


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Headless chromium from the system. Chromium's own sandbox cannot start as root
    ("Chromium sandboxing failed!"), so as root this test browser runs with it off
    (--no-sandbox, Playwright's default too); as any other user it runs with it on. The
    pages it loads are ours, over loopback, with no script."""
    if not shutil.which(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: run `make setup` (scripts/setup-system.sh)")
    as_root = os.geteuid() == 0
    with sync_playwright() as p:
        launched = p.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            chromium_sandbox=not as_root,
            args=["--no-sandbox"] if as_root else [],
        )
        yield launched
        launched.close()


class Visit:
    """One page load with its console errors, page errors and CSP reports collected."""

    def __init__(self, browser: object, url: str) -> None:
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
        self.errors: list[str] = []
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.response = self.page.goto(url)

    def shot(self, name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def close(self) -> None:
        self.page.close()


@contextmanager
def visiting(browser: object, url: str) -> Iterator[Visit]:
    """A visit of ``url``, its page closed afterwards."""
    visit = Visit(browser, url)
    try:
        yield visit
    finally:
        visit.close()


def _pages(s: Scenario) -> dict[str, str]:
    return {
        "farm": "/",
        "runs": "/runs",
        "receipt-queue": f"/runs/{s.queue_runs['hostile']}",
        "receipt-process": f"/runs/{s.process_run}",
        "receipt-supports": f"/runs/{s.queue_runs['ok']}",
        "plan": f"/plans/{s.plan_ids['hostile']}",
        "snapshot": f"/snapshots/{s.snapshot_id}",
        "file": f"/snapshots/{s.snapshot_id}/file?path={quote('notes/<b>readme</b>.md')}",
        "claims": "/claims",
        "claim": f"/claims/{s.claim_id}",
        "gate": f"/gate/{s.changed_snapshot_id}",
        "batch": f"/batches/{s.batch_id}",
        "receipt-junit": f"/runs/{s.junit_run}",
        "runs-by-prefix": f"/runs?batch_id={s.batch_id[:8]}",
    }


def test_every_page_loads_without_errors_and_runs_no_script(
    browser: object, base_url: str, scenario: Scenario
) -> None:
    """Each page answers 200 with no console error, no CSP violation and no script run."""
    for name, path in _pages(scenario).items():
        visit = Visit(browser, base_url + path)
        try:
            assert visit.response is not None, name
            assert visit.response.status == 200, name
            assert visit.errors == [], (name, visit.errors)
            assert visit.page.evaluate("typeof window.__pwned") == "undefined", name
            assert visit.page.locator("script").count() == 0, name
            assert visit.shot(name).stat().st_size > 0
        finally:
            visit.close()


def test_hostile_output_renders_as_inert_visible_text(
    browser: object, base_url: str, scenario: Scenario
) -> None:
    """The probe's markup shows as text; escape sequences show as \\x1b, never raw."""
    visit = Visit(browser, f"{base_url}/runs/{scenario.queue_runs['hostile']}")
    try:
        shown = visit.page.locator("#stdout").inner_text()
        assert "<script>window.__pwned = 'script'</script>" in shown
        assert "<img src=x onerror=" in shown
        assert "\\x1b[31mred" in shown
        assert "\x1b" not in shown
        assert "\\x07" in shown
        assert visit.page.locator("main img").count() == 0
        assert visit.page.locator("main b").count() == 0
        assert "<b>bold</b>" in visit.page.locator("#stderr").inner_text()
        assert visit.page.evaluate("typeof window.__pwned") == "undefined"
        assert HOSTILE.split("<b>")[0] in shown
    finally:
        visit.close()


def test_filters_narrow_the_runs_list(browser: object, base_url: str, scenario: Scenario) -> None:
    """Choosing an outcome in the form lists only those runs; a batch link lists its runs."""
    visit = Visit(browser, f"{base_url}/runs")
    try:
        assert visit.page.locator("tr.run").count() == 5
        visit.page.select_option("select[name=outcome]", "refutes")
        visit.page.click("form.filters button")
        visit.page.wait_for_url("**/runs?*outcome=refutes*")
        assert visit.page.locator("tr.run").count() == 1
        assert scenario.queue_runs["fail"][:12] in visit.page.locator("tr.run").inner_text()
        visit.page.goto(f"{base_url}/runs?batch_id={scenario.batch_id}")
        assert visit.page.locator("tr.run").count() == 3
        visit.page.goto(f"{base_url}/runs?state=queued")
        assert visit.page.locator("#no-runs").count() == 1
        assert visit.errors == []
    finally:
        visit.close()


def test_pagination_walks_every_run_once(browser: object, base_url: str) -> None:
    """Pages of one run follow the next-page link through all five runs, none twice."""
    visit = Visit(browser, f"{base_url}/runs?limit=1")
    seen: list[str] = []
    try:
        while True:
            seen.append(visit.page.locator("tr.run td").first.inner_text())
            link = visit.page.locator("#next-page")
            if link.count() == 0:
                break
            link.click()
        assert len(seen) == 5
        assert len(set(seen)) == 5
    finally:
        visit.close()


def test_receipt_page_shows_verification_and_policy_only_by_id(
    browser: object, base_url: str, scenario: Scenario
) -> None:
    """The receipt verifies; limits from the policy file appear only as a digest."""
    visit = Visit(browser, f"{base_url}/runs/{scenario.queue_runs['ok']}")
    try:
        assert "commitment verifies" in visit.page.locator("#verification").inner_text()
        body = visit.page.locator("main").inner_text()
        assert "web-python" in body
        assert "limits_applied" in body
        assert "536870912" not in body  # the policy's memory limit, a value not an id
    finally:
        visit.close()


def test_runs_list_names_each_run_and_filters_by_prefix(
    browser: object, base_url: str, scenario: Scenario
) -> None:
    """The list shows each run's hypothesis (the hostile one as text), its attempts and
    time taken; typing an 8-hex run id prefix in the form lists that run alone."""
    with visiting(browser, f"{base_url}/runs") as visit:
        hypotheses = visit.page.locator("td.hypothesis").all_inner_texts()
        assert HOSTILE_HYPOTHESIS in hypotheses
        assert "ok.py exits 0" in hypotheses
        assert "1" in visit.page.locator("td.attempts").all_inner_texts()
        assert any(t.endswith(" s") for t in visit.page.locator("td.took").all_inner_texts())
        visit.page.fill("input[name=run_id]", scenario.queue_runs["ok"][:8])
        visit.page.click("form.filters button")
        visit.page.wait_for_url("**/runs?*run_id=*")
        assert visit.page.locator("tr.run").count() == 1
        assert scenario.queue_runs["ok"][:12] in visit.page.locator("tr.run").inner_text()
        assert visit.page.evaluate("typeof window.__pwned") == "undefined"
        assert visit.errors == []


def test_batch_page_from_the_runs_list(browser: object, base_url: str, scenario: Scenario) -> None:
    """A batch link leads to its page: progress 3/3, the two failures in order, the
    slowest runs, each linked to its run."""
    with visiting(browser, f"{base_url}/runs/{scenario.queue_runs['ok']}") as visit:
        visit.page.click(f"a[href='/batches/{scenario.batch_id}']")
        visit.page.wait_for_url(f"**/batches/{scenario.batch_id}")
        assert visit.page.locator("#progress").inner_text() == "3/3"
        failures = visit.page.locator("#failures tr.batch-run")
        assert failures.count() == 2
        assert scenario.queue_runs["fail"][:12] in failures.nth(0).inner_text()
        assert HOSTILE_HYPOTHESIS in failures.nth(1).inner_text()
        assert visit.page.locator("#slowest tr.batch-run").count() == 3
        visit.page.locator("#failures tr.batch-run a").first.click()
        visit.page.wait_for_url(f"**/runs/{scenario.queue_runs['fail']}")
        assert visit.errors == []
        assert visit.page.evaluate("typeof window.__pwned") == "undefined"


def test_junit_run_lists_its_failing_tests(
    browser: object, base_url: str, scenario: Scenario
) -> None:
    """A junit_xml run (the real sandbox wrote the report) lists its one failing test with
    its message, the markup in both shown as text."""
    with visiting(browser, f"{base_url}/runs/{scenario.junit_run}") as visit:
        section = visit.page.locator("#junit")
        assert "2 tests: 1 passed, 1 failed" in section.inner_text()
        rows = visit.page.locator("tr.failing-test")
        assert rows.count() == 1
        assert f"tests.test_web::{HOSTILE_TEST}" in rows.inner_text()
        assert HOSTILE_MESSAGE in rows.inner_text()
        assert visit.page.locator("main img").count() == 0
        assert visit.page.evaluate("typeof window.__pwned") == "undefined"


def test_claim_evidence_links_to_its_receipt(
    browser: object, base_url: str, scenario: Scenario
) -> None:
    """Following a claim's evidence link opens the run page of its receipt, which verifies."""
    with visiting(browser, f"{base_url}/claims/{scenario.claim_id}") as visit:
        visit.page.locator("a.evidence-receipt").first.click()
        visit.page.wait_for_url(f"**/runs/{scenario.queue_runs['ok']}")
        assert "commitment verifies" in visit.page.locator("#verification").inner_text()
        assert visit.errors == []


def test_farm_page_counts_runs_in_process(browser: object, base_url: str) -> None:
    """The farm page counts the run executed in a process: five finished, one of them in
    a process, and the outcomes chart is not empty."""
    with visiting(browser, f"{base_url}/") as visit:
        assert visit.page.locator("#finished").inner_text() == "5"
        assert visit.page.locator("#in-process").inner_text() == "1"
        assert "nothing yet" not in visit.page.locator("main").inner_text()
