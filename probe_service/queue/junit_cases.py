"""A probe's own test cases in the batch JUnit: one testsuite per probe with a JUnit report.

docs/ARCHITECTURE.md, "JUnit oracle": a probe whose oracle read a JUnit report carries
every test case through to ``submit --junit`` -- outcome, message, time and captured
output -- so a CI farm sees every test of every probe. The cases come from the receipt
(committed outcomes, operational captured output), never from the probe's file again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from xml.etree import ElementTree as ET

from ..safe_text import safe_line, safe_text

__all__ = ["SuiteCounts", "add_probe_suite"]

SuiteCounts = tuple[int, int, int, float]
_ELEMENT = {"failed": "failure", "error": "error", "skipped": "skipped"}


def _case(suite: ET.Element, case: Mapping[str, Any], output: Mapping[str, Any]) -> float:
    test_id = str(case.get("id", ""))
    classname, _, name = test_id.rpartition("::")
    seconds = case.get("time")
    seconds = float(seconds) if isinstance(seconds, int | float) else 0.0
    element = ET.SubElement(
        suite,
        "testcase",
        classname=safe_line(classname),
        name=safe_line(name or test_id),
        time=f"{seconds:.3f}",
    )
    outcome = str(case.get("outcome", ""))
    if outcome in _ELEMENT:
        message = safe_line(case.get("message", ""))
        ET.SubElement(element, _ELEMENT[outcome], message=message, type=outcome).text = message
    for stream in ("system_out", "system_err"):
        if output.get(stream):
            ET.SubElement(element, stream.replace("_", "-")).text = safe_text(output[stream])
    return seconds


def add_probe_suite(
    root: ET.Element, probe_name: str, receipt: Mapping[str, Any], timestamp: str
) -> SuiteCounts | None:
    """Append the probe's test cases as a testsuite of ``root``; None when it has none.

    Returns ``(tests, failures, errors, time)`` for the enclosing totals.
    """
    junit = receipt.get("committed", {}).get("junit")
    if not isinstance(junit, dict) or not isinstance(junit.get("cases"), list):
        return None
    outputs = {
        str(entry.get("id")): entry
        for entry in receipt.get("operational", {}).get("junit_output") or []
        if isinstance(entry, dict)
    }
    cases = [case for case in junit["cases"] if isinstance(case, dict)]
    failures = sum(1 for case in cases if case.get("outcome") == "failed")
    errors = sum(1 for case in cases if case.get("outcome") == "error")
    skipped = sum(1 for case in cases if case.get("outcome") == "skipped")
    suite = ET.SubElement(
        root,
        "testsuite",
        name=safe_line(probe_name),
        tests=str(len(cases)),
        failures=str(failures),
        errors=str(errors),
        skipped=str(skipped),
        timestamp=timestamp,
    )
    properties = ET.SubElement(suite, "properties")
    for name, value in (
        ("receipt", str(receipt.get("receipt_sha256", ""))),
        ("report_sha256", str(junit.get("report_sha256", ""))),
    ):
        ET.SubElement(properties, "property", name=name, value=value)
    total = sum(_case(suite, case, outputs.get(str(case.get("id")), {})) for case in cases)
    suite.set("time", f"{total:.3f}")
    return len(cases), failures, errors, total
