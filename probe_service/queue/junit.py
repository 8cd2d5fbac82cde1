"""JUnit XML for CI: one testcase per plan; supports passes, refutes fails, inconclusive errors."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from xml.etree import ElementTree as ET

from .submit import RunSummary

__all__ = ["write_junit"]


def write_junit(path: Path, batch_id: str, results: Sequence[RunSummary]) -> None:
    """Write ``results`` as a JUnit testsuite named after the batch."""
    failures = sum(1 for r in results if r.outcome == "refutes")
    errors = sum(1 for r in results if r.outcome != "refutes" and r.outcome != "supports")
    suite = ET.Element(
        "testsuite",
        name=f"byte-probe batch {batch_id}",
        tests=str(len(results)),
        failures=str(failures),
        errors=str(errors),
    )
    suite_props = ET.SubElement(suite, "properties")
    reused = sum(1 for r in results if r.reused)
    ET.SubElement(suite_props, "property", name="reused", value=str(reused))
    for r in results:
        case = ET.SubElement(suite, "testcase", classname="byte-probe", name=r.name or r.plan_id)
        message = f"{r.reason} (receipt {r.receipt_sha256 or 'none'}, run {r.run_id})"
        if r.outcome == "refutes":
            ET.SubElement(case, "failure", message=message, type="refutes").text = message
        elif r.outcome != "supports":
            ET.SubElement(
                case, "error", message=message, type=r.outcome or "unfinished"
            ).text = message
        props = ET.SubElement(case, "properties")
        for key, value in (
            ("plan_id", r.plan_id),
            ("receipt_sha256", r.receipt_sha256 or ""),
            ("reused", "true" if r.reused else "false"),
        ):
            ET.SubElement(props, "property", name=key, value=value)
    ET.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)
