"""The web view in a real browser: Debian's chromium driven by Playwright (never a
downloaded browser) against a store filled by a real sandboxed scenario."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from playwright.sync_api import sync_playwright

from .conftest import filled
from .scenario import HOSTILE, Scenario

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
        assert visit.page.locator("tr.run").count() == 4
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
    """Pages of one run follow the next-page link through all four runs, none twice."""
    visit = Visit(browser, f"{base_url}/runs?limit=1")
    seen: list[str] = []
    try:
        while True:
            seen.append(visit.page.locator("tr.run td").first.inner_text())
            link = visit.page.locator("#next-page")
            if link.count() == 0:
                break
            link.click()
        assert len(seen) == 4
        assert len(set(seen)) == 4
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
