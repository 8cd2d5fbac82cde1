"""`byte-probe metrics`: the store-wide endpoint's one scrape, as text and as JSON."""

from __future__ import annotations

import json

from prometheus_client.parser import text_string_to_metric_families

from .conftest import CliRunner, PlanCreator


def test_once_prints_the_store_wide_scrape_and_no_worker_counter(
    cli: CliRunner, created: PlanCreator
) -> None:
    """--once prints one scrape in the text format: the store answered, the run's receipt
    is in the duration histogram, and no worker's own counter is there (workers export
    those)."""
    assert cli("run", created(), "--policy", "cli-python", "--json")[0] == 0
    code, out, err = cli("metrics", "--once")
    assert (code, err) == (0, "")
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(out)
        for s in family.samples
    }
    assert samples[("byte_probe_up", ())] == 1
    assert samples[("byte_probe_runs_worker_lost_total", ())] == 0
    assert samples[("byte_probe_duration_seconds_count", ())] == 1
    assert not any(name.startswith("byte_probe_worker_") for name, _ in samples)


def test_json_carries_every_sample(cli: CliRunner) -> None:
    """--json prints the same scrape as a list of name, labels and value."""
    code, out, _ = cli("metrics", "--json")
    assert code == 0
    names = {m["name"] for m in json.loads(out)["metrics"]}
    assert {"byte_probe_up", "byte_probe_workers_alive", "byte_probe_runs_reattempted"} <= names
