"""Decode the JUnit XML report a probe wrote: hardened, bounded, one error type.

docs/ARCHITECTURE.md, "JUnit oracle". The report is probe output, so it is hostile: it is
parsed with ``defusedxml`` (no DTD, no entity, no external reference -- a DOCTYPE is
refused outright), only after its size is checked, and every kept string is bounded.
"""

from __future__ import annotations

import hashlib
import math
from typing import Literal
from xml.etree.ElementTree import Element, ParseError

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring
from pydantic import BaseModel, ConfigDict

from ..errors import JunitReportInvalid

__all__ = [
    "MAX_JUNIT_CASES",
    "MAX_JUNIT_REPORT_BYTES",
    "JunitCase",
    "JunitReport",
    "decode_junit_report",
]

#: Largest report read back from scratch.
MAX_JUNIT_REPORT_BYTES = 4 * 1024 * 1024
#: Most test cases one report may hold.
MAX_JUNIT_CASES = 10_000
#: Longest message kept per case, and longest captured output kept per stream.
MAX_MESSAGE_CHARS = 1024
MAX_CAPTURED_CHARS = 4096

CaseOutcome = Literal["passed", "failed", "error", "skipped"]
_OUTCOME_TAGS: tuple[tuple[str, CaseOutcome], ...] = (
    ("error", "error"),
    ("failure", "failed"),
    ("skipped", "skipped"),
)


class JunitCase(BaseModel):
    """One test case of a report, with bounded message and captured output."""

    model_config = ConfigDict(frozen=True)

    id: str
    outcome: CaseOutcome
    time: float | None = None
    message: str = ""
    system_out: str = ""
    system_err: str = ""

    def committed(self) -> dict[str, object]:
        """The case as a receipt commits to it (captured output is kept beside it)."""
        return {"id": self.id, "outcome": self.outcome, "time": self.time, "message": self.message}


class JunitReport(BaseModel):
    """A decoded report: its digest and its cases in document order."""

    model_config = ConfigDict(frozen=True)

    sha256: str
    cases: tuple[JunitCase, ...]

    def counts(self) -> dict[str, int]:
        """Cases per outcome, and the total."""
        counts = {"tests": len(self.cases), "passed": 0, "failed": 0, "error": 0, "skipped": 0}
        for case in self.cases:
            counts[case.outcome] += 1
        return counts


def _bounded(text: str | None, limit: int) -> str:
    text = text or ""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[byte-probe: {len(text) - limit} more characters not kept]"


def _time(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def _case(element: Element) -> JunitCase:
    classname = element.get("classname") or ""
    name = element.get("name") or ""
    outcome: CaseOutcome = "passed"
    message = ""
    for tag, meaning in _OUTCOME_TAGS:
        found = element.find(tag)
        if found is not None:
            outcome = meaning
            message = found.get("message") or (found.text or "")
            break
    return JunitCase(
        id=_bounded(f"{classname}::{name}" if classname else name, MAX_MESSAGE_CHARS),
        outcome=outcome,
        time=_time(element.get("time")),
        message=_bounded(message, MAX_MESSAGE_CHARS),
        system_out=_bounded(element.findtext("system-out"), MAX_CAPTURED_CHARS),
        system_err=_bounded(element.findtext("system-err"), MAX_CAPTURED_CHARS),
    )


def decode_junit_report(data: bytes, where: str = "report") -> JunitReport:
    """Decode a JUnit XML report (``<testsuites>`` or ``<testsuite>`` root).

    Raises ``JunitReportInvalid`` naming ``where`` when the report is over
    ``MAX_JUNIT_REPORT_BYTES``, has a DOCTYPE, an entity or an external reference,
    is not well-formed XML, has another root, or holds more than ``MAX_JUNIT_CASES`` cases.
    """
    if len(data) > MAX_JUNIT_REPORT_BYTES:
        raise JunitReportInvalid(
            f"{where}: {len(data)} bytes is over the {MAX_JUNIT_REPORT_BYTES}-byte report limit"
        )
    try:
        root = fromstring(data, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    except DefusedXmlException as exc:
        what = "a DOCTYPE (DTD)" if "DTD" in type(exc).__name__ else "an entity or reference"
        raise JunitReportInvalid(
            f"{where}: refused: {what} is not allowed in a JUnit report"
        ) from exc
    except (ParseError, ValueError, RecursionError) as exc:
        raise JunitReportInvalid(f"{where}: not well-formed XML ({exc})") from exc
    if root.tag not in ("testsuites", "testsuite"):
        raise JunitReportInvalid(
            f"{where}: root element must be testsuites or testsuite, not {root.tag[:64]!r}"
        )
    cases: list[JunitCase] = []
    for element in root.iter("testcase"):
        if len(cases) == MAX_JUNIT_CASES:
            raise JunitReportInvalid(f"{where}: more than {MAX_JUNIT_CASES} test cases")
        cases.append(_case(element))
    return JunitReport(sha256=hashlib.sha256(data).hexdigest(), cases=tuple(cases))
