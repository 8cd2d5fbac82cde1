"""JUnit XML for CI: one testcase per plan; supports passes, refutes fails, inconclusive errors.

The shape is Jenkins' junit-10.xsd (what GitLab and GitHub reporters also read): per case,
the time goes in ``time``, the outcome and reason in a ``failure``/``error``/``skipped``
element's message, bounded output in ``system-out``/``system-err``; properties only at the
testsuite level. Output is untrusted, so it is neutralised before it reaches the XML
(docs/ARCHITECTURE.md, "Trust rules").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from xml.etree import ElementTree as ET

from ..plans import Receipt
from ..plans.output import kept_output
from ..plans.receipt_parts import Junit, JunitCase
from ..safe_text import excerpt, safe_line
from .junit_cases import CasesOf, add_probe_suite
from .submit import RunSummary

__all__ = ["write_junit"]

#: Lines of each output stream kept from its start and from its end.
JUNIT_OUTPUT_LINES = 50


def _seconds(receipt: Receipt | None) -> float:
    if receipt is None:
        return 0.0
    elapsed = receipt.committed.elapsed_us
    if elapsed is not None:
        return elapsed / 1_000_000
    wall = receipt.operational.wall_seconds
    return 0.0 if wall is None else float(wall)


def _bounded(header: list[str], data: bytes) -> str:
    cut = excerpt(data, head=JUNIT_OUTPUT_LINES, tail=JUNIT_OUTPUT_LINES)
    note = [f"[byte-probe: {cut.note}]"] if cut.note else []
    return "\n".join([*header, *note, *cut.lines]) + "\n"


def _testcase(suite: ET.Element, r: RunSummary, receipt: Receipt | None) -> float:
    seconds = _seconds(receipt)
    case = ET.SubElement(
        suite,
        "testcase",
        classname="byte-probe",
        name=safe_line(r.name or r.plan_id),
        time=f"{seconds:.3f}",
    )
    reason = safe_line(r.reason or r.state)
    message = f"{reason} (receipt {r.receipt_sha256 or 'none'}, run {r.run_id})"
    if r.outcome == "refutes":
        ET.SubElement(case, "failure", message=message, type="refutes").text = message
    elif r.outcome is None:
        ET.SubElement(case, "skipped", message=f"not finished: {message}", type=r.state)
    elif r.outcome != "supports":
        ET.SubElement(case, "error", message=message, type=r.outcome).text = message
    exit_code = None if receipt is None else receipt.committed.exit_code
    header = [
        f"[byte-probe: plan {r.plan_id}, run {r.run_id}, receipt {r.receipt_sha256 or 'none'}"
        f"{' (reused)' if r.reused else ''}, outcome {r.outcome or r.state}, reason {reason}, "
        f"exit code {exit_code}]"
    ]
    stdout = b"" if receipt is None else kept_output(receipt, "stdout")
    stderr = b"" if receipt is None else kept_output(receipt, "stderr")
    ET.SubElement(case, "system-out").text = _bounded(header, stdout)
    ET.SubElement(case, "system-err").text = _bounded([], stderr)
    return seconds


def _inline_cases(receipt: Receipt) -> tuple[JunitCase, ...] | None:
    junit = receipt.committed.junit
    return junit.cases if isinstance(junit, Junit) else None


def write_junit(
    path: Path,
    batch_id: str,
    results: Sequence[RunSummary],
    receipts: Mapping[str, Receipt] | None = None,
    cases_of: CasesOf | None = None,
) -> None:
    """Write ``results`` as one JUnit testsuite named after the batch.

    ``receipts`` maps a receipt id to its receipt, for each case's time and output;
    ``cases_of`` reads every case of a probe's own report (a version-2 receipt's case
    list is a stored blob), the committed cases of a version-1 receipt when not given.
    """
    cases = cases_of or _inline_cases
    found = receipts or {}
    failures = sum(1 for r in results if r.outcome == "refutes")
    skipped = sum(1 for r in results if r.outcome is None)
    errors = len(results) - failures - skipped - sum(1 for r in results if r.outcome == "supports")
    root = ET.Element("testsuites", name="byte-probe")
    suite = ET.SubElement(
        root,
        "testsuite",
        name=f"byte-probe batch {batch_id}",
        tests=str(len(results)),
        failures=str(failures),
        errors=str(errors),
        skipped=str(skipped),
        timestamp=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S"),
    )
    suite_props = ET.SubElement(suite, "properties")
    for name, value in (("batch_id", batch_id), ("reused", str(sum(r.reused for r in results)))):
        ET.SubElement(suite_props, "property", name=name, value=value)
    total = sum(_testcase(suite, r, found.get(r.receipt_sha256 or "")) for r in results)
    suite.set("time", f"{total:.3f}")
    totals: list[float] = [len(results), failures, errors, total]
    # docs/ARCHITECTURE.md, "JUnit oracle": each probe's own test cases follow, one
    # testsuite per probe, and count in the document's totals.
    for r in results:
        receipt = found.get(r.receipt_sha256 or "")
        if receipt is None:
            continue
        timestamp = suite.get("timestamp", "")
        counts = add_probe_suite(root, r.name or r.plan_id, receipt, timestamp, cases)
        if counts is not None:
            totals = [a + b for a, b in zip(totals, counts, strict=True)]
    for attribute, count in zip(("tests", "failures", "errors"), totals, strict=False):
        root.set(attribute, str(int(count)))
    root.set("time", f"{totals[3]:.3f}")
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
