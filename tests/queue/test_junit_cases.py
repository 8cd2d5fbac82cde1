"""`submit --junit` carries each probe's own test cases through (write_junit, no queue).

The receipts here are built as probe_run builds them (committed junit summary,
operational captured output); the end-to-end path is covered by the sandbox test in
tests/toolchains/test_suite_in_sandbox.py.
"""

from __future__ import annotations

import base64
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from probe_service.plans import parse_receipt
from probe_service.queue.junit import write_junit
from probe_service.queue.submit import RunSummary

from ..receipt_fields import committed_fields, receipt_of

JUNIT_XSD = Path(__file__).resolve().parent.parent / "fixtures" / "junit-10.xsd"


def _receipt(sha: str) -> dict[str, Any]:
    """A receipt's JSON whose probe read a two-test JUnit report (sha aside: not verified)."""
    junit = {
        "report_sha256": "9" * 64,
        "tests": 2,
        "passed": 1,
        "failed": 1,
        "error": 0,
        "skipped": 0,
        "cases": [
            {"id": "tests.test_calc::test_add", "outcome": "passed", "time": 0.25, "message": ""},
            {
                "id": "tests.test_calc::test_div",
                "outcome": "failed",
                "time": 0.5,
                "message": "ZeroDivisionError \x1b[31m",
            },
        ],
    }
    committed = {**committed_fields(), "elapsed_us": 500_000, "exit_code": 1, "junit": junit}
    output = [{"id": "tests.test_calc::test_div", "system_out": "dividing\n", "system_err": ""}]
    built = receipt_of(committed, {"junit_output": output}).to_json()
    return {**built, "receipt_sha256": sha}


@pytest.fixture
def report(tmp_path: Path) -> Path:
    """A batch of one probe that ran a two-test suite, and one probe without a suite."""
    results = [
        RunSummary("r1", 1, "p" * 64, "calc suite", "done", "refutes", "oracle_failed", "a" * 64),
        RunSummary("r2", 2, "q" * 64, "plain", "done", "supports", "oracle_passed", "b" * 64),
    ]
    path = tmp_path / "probes.xml"
    write_junit(path, "batch-1", results, {"a" * 64: parse_receipt(_receipt("a" * 64))})
    return path


def test_validates_against_junit_xsd(report: Path) -> None:
    """The document with per-probe suites still validates against junit-10.xsd."""
    xmlschema = pytest.importorskip("xmlschema")
    xmlschema.XMLSchema(str(JUNIT_XSD)).validate(str(report))


def test_each_test_case_is_carried_with_time_outcome_and_output(report: Path) -> None:
    """The probe's suite follows the batch suite, one testcase per test of the report."""
    root = ET.parse(report).getroot()  # noqa: S314 - our own file
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["byte-probe batch batch-1", "calc suite"]
    cases = suites[1].findall("testcase")
    assert [(c.get("classname"), c.get("name"), c.get("time")) for c in cases] == [
        ("tests.test_calc", "test_add", "0.250"),
        ("tests.test_calc", "test_div", "0.500"),
    ]
    failure = cases[1].find("failure")
    assert failure is not None
    assert failure.get("message") == "ZeroDivisionError \\x1b[31m"
    assert cases[1].findtext("system-out") == "dividing\n"
    assert (root.get("tests"), root.get("failures")) == ("4", "2")


def test_noncharacters_in_probe_text_keep_the_document_well_formed(tmp_path: Path) -> None:
    """U+FFFE/U+FFFF (valid UTF-8, invalid XML 1.0) in a plan name, a probe's stdout, a
    case id, message or output never make the CI report unparsable."""
    hostile = "x\ufffey\uffffz"
    receipt = _receipt("a" * 64)
    receipt["operational"]["stdout_b64"] = base64.b64encode(hostile.encode()).decode()
    receipt["operational"]["junit_output"][0]["system_out"] = hostile
    case = receipt["committed"]["junit"]["cases"][1]
    case["id"] = f"tests.{hostile}::test_{hostile}"
    case["message"] = hostile
    receipt["operational"]["junit_output"][0]["id"] = case["id"]
    results = [
        RunSummary("r1", 1, "p" * 64, hostile, "done", "refutes", hostile, "a" * 64),
    ]
    path = tmp_path / "probes.xml"
    write_junit(path, "batch-1", results, {"a" * 64: parse_receipt(receipt)})
    root = ET.parse(path).getroot()  # noqa: S314 - our own file
    text = ET.tostring(root, encoding="unicode")
    assert "\ufffe" not in text
    assert "\uffff" not in text
    assert "x\\ufffey\\uffffz" in root.findall("testsuite")[1].findall("testcase")[1].findtext(
        "system-out", ""
    )
