"""The gate report as JUnit XML, for a CI job's test report (``gate --junit FILE``).

One testsuite ``byte-probe gate``: a testcase ``gate`` (a failure when the gate does not
pass), then one per open obligation on the gated snapshot (a failure naming the claim,
what moved and the next command), per receipt refused by the signature requirement (a
failure) and per refuted live claim (a failure with ``fail_on_refuted``, else a passing
case whose ``system-out`` carries the warning). The shape is Jenkins' junit-10.xsd, as the
queue's JUnit report (``queue/junit.py``). Statements and reasons are hostile text
(docs/ARCHITECTURE.md, "Trust rules"): each goes through ``safe_line`` before the XML.
"""

from __future__ import annotations

from xml.etree import ElementTree as ET

from ..safe_text import safe_line
from .gate_render import render_gate_text
from .gate_report import GateReport

__all__ = ["render_gate_junit"]


def _case(suite: ET.Element, classname: str, name: str, failure: str | None) -> ET.Element:
    case = ET.SubElement(suite, "testcase", classname=classname, name=safe_line(name), time="0")
    if failure is not None:
        ET.SubElement(case, "failure", message=safe_line(failure), type="gate").text = safe_line(
            failure
        )
    return case


def render_gate_junit(report: GateReport) -> str:
    """``report`` as one JUnit XML document (UTF-8 text, with its declaration)."""
    root = ET.Element("testsuites", name="byte-probe")
    suite = ET.SubElement(root, "testsuite", name="byte-probe gate")
    scope = report.scope or "whole store"
    where = f"snapshot {report.snapshot_id}, scope {scope}"
    gate = _case(suite, "byte-probe.gate", "gate", None if report.passed else f"closed: {where}")
    ET.SubElement(gate, "system-out").text = render_gate_text(report) + "\n"
    failures = 0 if report.passed else 1
    for entry in report.entries:
        moved = "; ".join(safe_line(r) for r in entry.reasons)
        text = f"{entry.obligation_id} open: {moved}. Next: {safe_line(entry.recheck.next)}"
        _case(suite, f"byte-probe.{entry.scope}", f"{entry.claim_id} {entry.statement}", text)
        failures += 1
    for why in report.unsigned_evidence:
        _case(suite, "byte-probe.signatures", why, f"not signed by a required key: {why}")
        failures += 1
    for claim in report.refuted:
        name = f"{claim.claim_id} {claim.statement}"
        said = f"refuted: {', '.join(claim.receipts) or 'no receipt'}"
        case = _case(
            suite, f"byte-probe.{claim.scope}", name, said if report.fail_on_refuted else None
        )
        if report.fail_on_refuted:
            failures += 1
        else:
            ET.SubElement(case, "system-out").text = f"warning: {said}\n"
    tests = len(suite)
    for element in (root, suite):
        element.set("tests", str(tests))
        element.set("failures", str(failures))
        element.set("errors", "0")
    suite.set("skipped", "0")
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
