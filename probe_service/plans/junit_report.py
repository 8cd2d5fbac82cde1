"""Decode the JUnit XML report a probe wrote: hardened, streaming, bounded, one error type.

docs/ARCHITECTURE.md, "JUnit oracle". The report is probe output, so it is hostile: it is
parsed with ``defusedxml`` (no DTD, no entity, no external reference -- a DOCTYPE is
refused outright), streaming: each ``testcase`` is dropped from the tree as soon as it is
read, so memory holds the open elements and one case, never the document. What is kept is
fixed by the caps of the policy (``JunitLimits``): the counts, the worst outcome of each
required test, the first ``MAX_LISTED_NOT_PASSED`` failing cases and the canonical case
list, written zstd-compressed as it is read (the list a version-2 receipt commits to by
its digest and stores as a blob).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from dataclasses import dataclass
from io import BytesIO
from typing import BinaryIO, Literal
from xml.etree.ElementTree import Element, ParseError

import zstandard
from defusedxml import DefusedXmlException
from defusedxml.ElementTree import iterparse
from pydantic import BaseModel, ConfigDict, Field

from ..canonical import canonical_json
from ..errors import JunitReportInvalid
from ..policies import Policy
from ..policies.model import DEFAULT_JUNIT_MAX_BYTES, DEFAULT_JUNIT_MAX_CASES

__all__ = [
    "DEFAULT_JUNIT_MAX_BYTES",
    "DEFAULT_JUNIT_MAX_CASES",
    "MAX_LISTED_NOT_PASSED",
    "CaseList",
    "JunitCase",
    "JunitLimits",
    "JunitReport",
    "decode_junit_report",
    "decompress_case_list",
    "junit_limits",
    "read_junit_report",
]

#: Longest message kept per case, and longest captured output kept per stream.
MAX_MESSAGE_CHARS = 1024
MAX_CAPTURED_CHARS = 4096
#: Failing (failed or error) cases kept whole -- message and captured output -- for the
#: receipt's own list and its operational output; every case is in the case list.
MAX_LISTED_NOT_PASSED = 100
#: Bytes read from the report per step.
_CHUNK = 1 << 16

CaseOutcome = Literal["passed", "failed", "error", "skipped"]
_OUTCOME_TAGS: tuple[tuple[str, CaseOutcome], ...] = (
    ("error", "error"),
    ("failure", "failed"),
    ("skipped", "skipped"),
)
#: A test id reported more than once counts at its worst instance.
_OUTCOME_RANK = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}


@dataclass(frozen=True)
class JunitLimits:
    """The policy's caps on one report: its bytes and its test cases."""

    max_bytes: int = DEFAULT_JUNIT_MAX_BYTES
    max_cases: int = DEFAULT_JUNIT_MAX_CASES


def junit_limits(policy: Policy) -> JunitLimits:
    """The policy's caps, its defaults where it sets none."""
    return JunitLimits(
        max_bytes=policy.junit_max_bytes or DEFAULT_JUNIT_MAX_BYTES,
        max_cases=policy.junit_max_cases or DEFAULT_JUNIT_MAX_CASES,
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
        """The case as the case list holds it (captured output is kept beside it)."""
        return {"id": self.id, "outcome": self.outcome, "time": self.time, "message": self.message}


class CaseList(BaseModel):
    """The canonical case list -- ``canonical_json([case.committed(), ...])`` -- by its
    SHA-256 and length, zstd-compressed."""

    model_config = ConfigDict(frozen=True)

    sha256: str
    size: int
    compressed: bytes = Field(repr=False)


class JunitReport(BaseModel):
    """A decoded report: its digest, counts, required tests, failing cases and case list."""

    model_config = ConfigDict(frozen=True)

    sha256: str
    tests: int
    passed: int
    failed: int
    error: int
    skipped: int
    #: Worst outcome of each required test that the report holds.
    required: dict[str, CaseOutcome] = {}
    #: The first ``MAX_LISTED_NOT_PASSED`` failed or erred cases, in document order.
    not_passed: tuple[JunitCase, ...] = ()
    cases: CaseList

    def counts(self) -> dict[str, int]:
        """Cases per outcome, and the total."""
        return {k: getattr(self, k) for k in ("tests", "passed", "failed", "error", "skipped")}


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


class _CappedReader:
    """A file-like view of ``source`` that refuses, naming the cap and the size, once
    more than ``cap`` bytes were read."""

    def __init__(self, source: BinaryIO, cap: int, where: str, size: int | None) -> None:
        self._source, self._cap, self._where, self._size = source, cap, where, size
        self.read_bytes = 0

    def read(self, n: int = -1) -> bytes:
        want = _CHUNK if n is None or n < 0 else min(n, _CHUNK)
        chunk = self._source.read(want)
        self.read_bytes += len(chunk)
        if self.read_bytes > self._cap:
            raise _over_bytes(self._where, self._size or self.read_bytes, self._cap)
        return chunk


def _over_bytes(where: str, size: int, cap: int) -> JunitReportInvalid:
    at_least = "" if size > cap else "at least "
    return JunitReportInvalid(
        f"{where}: the report is {at_least}{size} bytes, over the policy's "
        f"junit_max_bytes cap of {cap} bytes"
    )


class _Collector:
    """What a report keeps while it streams: counts, required outcomes, failing cases and
    the compressed canonical case list."""

    def __init__(self, require: Iterable[str]) -> None:
        self.counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
        self.required: dict[str, CaseOutcome] = {}
        self.wanted = frozenset(require)
        self.not_passed: list[JunitCase] = []
        self.digest = hashlib.sha256()
        self.size = 0
        self.out = BytesIO()
        self.compressor = zstandard.ZstdCompressor().compressobj()

    def _write(self, data: bytes) -> None:
        self.digest.update(data)
        self.size += len(data)
        self.out.write(self.compressor.compress(data))

    def add(self, case: JunitCase) -> None:
        self._write(
            (b"," if sum(self.counts.values()) else b"[") + canonical_json(case.committed())
        )
        self.counts[case.outcome] += 1
        if case.id in self.wanted:
            seen = self.required.get(case.id, "passed")
            if _OUTCOME_RANK[case.outcome] >= _OUTCOME_RANK[seen]:
                self.required[case.id] = case.outcome
        if case.outcome in ("failed", "error") and len(self.not_passed) < MAX_LISTED_NOT_PASSED:
            self.not_passed.append(case)

    def report(self, sha256: str) -> JunitReport:
        self._write(b"]" if sum(self.counts.values()) else b"[]")
        self.out.write(self.compressor.flush())
        cases = CaseList(
            sha256=self.digest.hexdigest(), size=self.size, compressed=self.out.getvalue()
        )
        return JunitReport(
            sha256=sha256,
            tests=sum(self.counts.values()),
            **self.counts,
            required=self.required,
            not_passed=tuple(self.not_passed),
            cases=cases,
        )


class _HashingReader:
    """Hash every byte the parser reads: the report's own digest, in one pass."""

    def __init__(self, source: _CappedReader) -> None:
        self._source, self.digest = source, hashlib.sha256()

    def read(self, n: int = -1) -> bytes:
        chunk = self._source.read(n)
        self.digest.update(chunk)
        return chunk


def read_junit_report(
    source: BinaryIO,
    where: str = "report",
    limits: JunitLimits = JunitLimits(),
    require: Iterable[str] = (),
    size: int | None = None,
) -> JunitReport:
    """Decode a JUnit XML report (``<testsuites>`` or ``<testsuite>`` root) from
    ``source``, streaming; ``size`` (the file's, when known) is named when it is over.

    Raises ``JunitReportInvalid`` naming ``where`` when the report is over
    ``limits.max_bytes`` or holds more than ``limits.max_cases`` cases (naming the cap and
    the size), has a DOCTYPE, an entity or an external reference, is not well-formed XML,
    or has another root.
    """
    if size is not None and size > limits.max_bytes:
        raise _over_bytes(where, size, limits.max_bytes)
    reader = _HashingReader(_CappedReader(source, limits.max_bytes, where, size))
    collector = _Collector(require)
    tests = 0
    try:
        events = iterparse(
            reader, events=("start", "end"), forbid_dtd=True, forbid_entities=True,
            forbid_external=True,
        )  # fmt: skip
        open_elements: list[Element] = []
        in_case = 0
        for event, element in events:
            if event == "start":
                if not open_elements and element.tag not in ("testsuites", "testsuite"):
                    raise JunitReportInvalid(
                        f"{where}: root element must be testsuites or testsuite, "
                        f"not {element.tag[:64]!r}"
                    )
                open_elements.append(element)
                in_case += element.tag == "testcase"
                continue
            open_elements.pop()
            if element.tag == "testcase":
                in_case -= 1
                tests += 1
                if tests <= limits.max_cases:
                    collector.add(_case(element))
            # Drop what was read (outside an open case, whose children it still needs):
            # memory holds the open path and one case, never the document.
            if open_elements and not in_case:
                open_elements[-1].remove(element)
    except DefusedXmlException as exc:
        what = "a DOCTYPE (DTD)" if "DTD" in type(exc).__name__ else "an entity or reference"
        raise JunitReportInvalid(
            f"{where}: refused: {what} is not allowed in a JUnit report"
        ) from exc
    except (ParseError, ValueError, RecursionError) as exc:
        raise JunitReportInvalid(f"{where}: not well-formed XML ({exc})") from exc
    if tests > limits.max_cases:
        raise JunitReportInvalid(
            f"{where}: the report holds {tests} test cases, over the policy's "
            f"junit_max_cases cap of {limits.max_cases}"
        )
    return collector.report(reader.digest.hexdigest())


def decode_junit_report(
    data: bytes,
    where: str = "report",
    limits: JunitLimits = JunitLimits(),
    require: Iterable[str] = (),
) -> JunitReport:
    """Decode a report held in memory; raises as ``read_junit_report``."""
    return read_junit_report(BytesIO(data), where, limits, require, size=len(data))


def decompress_case_list(cases: CaseList) -> bytes:
    """The canonical case list's bytes (bounded by its recorded size)."""
    return zstandard.ZstdDecompressor().decompress(cases.compressed, max_output_size=cases.size)
