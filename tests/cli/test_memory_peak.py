"""`run` and `receipt show` print the probe's memory high-water mark beside its limit, so a
policy's `memory_bytes` is sized from a measured run (docs/ARCHITECTURE.md, "Limits")."""

from __future__ import annotations

import io

from rich.console import Console

from probe_service.cli.results import print_receipt
from probe_service.plans.receipts import verify_receipt
from probe_service.plans.summary import summarize_receipt

from ..receipt_fields import committed_fields, operational_fields, receipt_of


def _printed(operational: dict[str, object]) -> str:
    out = io.StringIO()
    receipt = receipt_of(committed_fields(), operational)
    print_receipt(Console(file=out, width=200, color_system=None), receipt, "receipt x")
    return out.getvalue()


def test_the_peak_is_printed_beside_the_limit() -> None:
    """A receipt with a peak prints it in MiB with the memory_bytes it ran under."""
    operational = {**operational_fields(), "memory_peak_bytes": 300 * 1024 * 1024}
    limit = committed_fields()["limits_applied"]["memory_bytes"] // (1024 * 1024)
    assert f"peak 300.0 MiB of its {limit} MiB memory_bytes" in _printed(operational)


def test_a_receipt_without_a_peak_prints_no_row() -> None:
    """An older receipt (no peak recorded) prints no memory row, and no null in JSON."""
    receipt = receipt_of(committed_fields(), operational_fields())
    assert "memory_peak_bytes" not in receipt.operational.json_values()
    assert summarize_receipt(receipt)["memory_peak_bytes"] is None
    assert "peak" not in _printed(operational_fields())


def test_the_peak_is_outside_the_commitment() -> None:
    """The peak is operational: a receipt carrying one verifies, and its digest is the
    digest of the same receipt without it."""
    with_peak = receipt_of(
        committed_fields(), {**operational_fields(), "memory_peak_bytes": 123_456_789}
    )
    without = receipt_of(committed_fields(), operational_fields())
    assert with_peak.receipt_sha256 == without.receipt_sha256
    assert verify_receipt(with_peak.to_json()) == with_peak.receipt_sha256
