"""A probe's own test cases in the batch JUnit: one testsuite per probe with a JUnit report.

docs/ARCHITECTURE.md, "JUnit oracle": a probe whose oracle read a JUnit report carries
every test case through to ``submit --junit`` -- outcome, message, time and captured
output -- so a CI farm sees every test of every probe. The cases come from the receipt
(committed outcomes, operational captured output), never from the probe's file again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from xml.etree import ElementTree as ET

from ..plans import Receipt
from ..plans.receipt_parts import JunitCase, JunitOutput
from ..safe_text import safe_line, safe_text

__all__ = ["CasesOf", "SuiteCounts", "add_probe_suite"]

SuiteCounts = tuple[int, int, int, float]
#: Every case of a receipt's report (a version-2 receipt's from its stored case list).
CasesOf = Callable[[Receipt], Sequence[JunitCase] | None]
_ELEMENT = {"failed": "failure", "error": "error", "skipped": "skipped"}


def _case(suite: ET.Element, case: JunitCase, output: JunitOutput | None) -> float:
    classname, _, name = case.id.rpartition("::")
    seconds = 0.0 if case.time is None else float(case.time)
    element = ET.SubElement(
        suite,
        "testcase",
        classname=safe_line(classname),
        name=safe_line(name or case.id),
        time=f"{seconds:.3f}",
    )
    if case.outcome in _ELEMENT:
        message = safe_line(case.message)
        ET.SubElement(
            element, _ELEMENT[case.outcome], message=message, type=case.outcome
        ).text = message
    for stream in ("system_out", "system_err"):
        text = "" if output is None else getattr(output, stream)
        if text:
            ET.SubElement(element, stream.replace("_", "-")).text = safe_text(text)
    return seconds


def add_probe_suite(
    root: ET.Element, probe_name: str, receipt: Receipt, timestamp: str, cases_of: CasesOf
) -> SuiteCounts | None:
    """Append the probe's test cases as a testsuite of ``root``; None when it has none.

    Returns ``(tests, failures, errors, time)`` for the enclosing totals.
    """
    junit = receipt.committed.junit
    cases = cases_of(receipt)
    if junit is None or cases is None:
        return None
    outputs = {entry.id: entry for entry in receipt.operational.junit_output or ()}
    failures = sum(1 for case in cases if case.outcome == "failed")
    errors = sum(1 for case in cases if case.outcome == "error")
    skipped = sum(1 for case in cases if case.outcome == "skipped")
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
        ("receipt", receipt.receipt_sha256),
        ("report_sha256", junit.report_sha256),
    ):
        ET.SubElement(properties, "property", name=name, value=value)
    total = sum(_case(suite, case, outputs.get(case.id)) for case in cases)
    suite.set("time", f"{total:.3f}")
    return len(cases), failures, errors, total
