"""The JUnit report decoder either decodes a probe's report or raises JunitReportInvalid.

Inputs: arbitrary bytes, XML-ish fragments, near-valid reports with one piece changed,
and DTD/entity payloads. The report is written by the probe, so every input is hostile
(docs/ARCHITECTURE.md, "JUnit oracle").
"""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from probe_service.errors import JunitReportInvalid
from probe_service.plans.junit_report import (
    MAX_CAPTURED_CHARS,
    MAX_LISTED_NOT_PASSED,
    MAX_MESSAGE_CHARS,
    JunitLimits,
    decode_junit_report,
)

from .strategies import fed

#: A small cap, so the fuzzer reaches it.
_LIMITS = JunitLimits(max_cases=50)

pytestmark = pytest.mark.fuzz

FUZZ = settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])

_TAGS = st.sampled_from(
    ["testsuites", "testsuite", "testcase", "failure", "error", "skipped", "system-out", "x"]
)
_ATTRS = st.sampled_from(["name", "classname", "time", "message", "type", "tests"])
_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30)


@st.composite
def elements(draw: st.DrawFn, depth: int = 0) -> str:
    """A random element of JUnit's vocabulary, with random attributes and children."""
    tag = draw(_TAGS)
    attrs = draw(st.dictionaries(_ATTRS, _TEXT, max_size=3))
    rendered = "".join(f' {k}="{v}"' for k, v in attrs.items())
    children = draw(st.lists(elements(depth + 1), max_size=3)) if depth < 3 else []
    body = "".join(children) + draw(_TEXT)
    return f"<{tag}{rendered}>{body}</{tag}>"


_PROLOGUES = st.sampled_from(
    [
        "",
        '<?xml version="1.0" encoding="utf-8"?>',
        "<!DOCTYPE testsuite>",
        '<!DOCTYPE t [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;&a;">]>',
        '<!DOCTYPE t [<!ENTITY x SYSTEM "file:///etc/passwd">]>',
        '<!DOCTYPE t SYSTEM "http://198.51.100.1/x.dtd">',
        '<?xml-stylesheet href="x"?>',
    ]
)
_VALID = (
    b'<testsuites><testsuite name="s" tests="2"><testcase classname="c" name="a" time="0.1"/>'
    b'<testcase classname="c" name="b"><failure message="m">t</failure></testcase>'
    b"</testsuite></testsuites>"
)


@st.composite
def near_valid(draw: st.DrawFn) -> bytes:
    """The valid report with one byte range replaced, deleted or duplicated."""
    start = draw(st.integers(0, len(_VALID)))
    end = draw(st.integers(start, len(_VALID)))
    middle = draw(st.binary(max_size=8) | st.just(_VALID[start:end] * 2) | st.just(b""))
    return _VALID[:start] + middle + _VALID[end:]


documents = (
    st.binary(max_size=300)
    | near_valid()
    | st.builds(lambda p, e: (p + e).encode("utf-8", "surrogatepass"), _PROLOGUES, elements())
)


class TestJunitReport:
    @FUZZ
    @given(documents)
    @example(b"<testsuite>" + b"<testcase name='t'/>" * (_LIMITS.max_cases + 1) + b"</testsuite>")
    @example(b"<a>" * 100_000)
    @example(b'<!DOCTYPE t [<!ENTITY x SYSTEM "file:///etc/passwd">]><testsuite>&x;</testsuite>')
    def test_decode_or_raise_junit_report_invalid(self, data: bytes) -> None:
        """decode_junit_report never raises anything but JunitReportInvalid, and what it
        keeps is bounded."""
        with contextlib.suppress(JunitReportInvalid):
            report = decode_junit_report(fed(data), limits=_LIMITS)
            assert report.tests <= _LIMITS.max_cases
            assert len(report.not_passed) <= MAX_LISTED_NOT_PASSED
            for case in report.not_passed:
                assert len(case.message) <= MAX_MESSAGE_CHARS + 64
                assert len(case.system_out) <= MAX_CAPTURED_CHARS + 64

    @FUZZ
    @given(_PROLOGUES.filter(lambda p: "DOCTYPE" in p), elements())
    def test_every_doctype_is_refused(self, prologue: str, body: str) -> None:
        """Whatever follows it, a report with a DOCTYPE is refused, saying so."""
        with pytest.raises(JunitReportInvalid, match="DOCTYPE"):
            decode_junit_report((prologue + body).encode("utf-8", "surrogatepass"))
