"""The junit_xml oracle: a hardened, bounded decoder and the verdicts it gives."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from probe_service.canonical import canonical_json, sha256_hex
from probe_service.errors import JunitReportInvalid
from probe_service.plans import parse_plan
from probe_service.plans.junit_report import (
    MAX_LISTED_NOT_PASSED,
    JunitLimits,
    JunitReport,
    decode_junit_report,
    decompress_case_list,
)
from probe_service.plans.oracle import decide_outcome, evaluate_check
from probe_service.policies.model import DEFAULT_JUNIT_MAX_BYTES, DEFAULT_JUNIT_MAX_CASES

from .conftest import oracle_doc, plan_doc

REPORT = b"""<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="3">
<testcase classname="tests.test_calc" name="test_add" time="0.002">
  <system-out>adding</system-out></testcase>
<testcase classname="tests.test_calc" name="test_div" time="0.010">
  <failure message="ZeroDivisionError">trace</failure></testcase>
<testcase classname="tests.test_calc" name="test_later" time="0"><skipped message="todo"/>
</testcase>
</testsuite></testsuites>"""


def _plan(require: tuple[str, ...] = (), refutes: bool = True) -> object:
    check = {"kind": "junit_xml", "path": "out/report.xml", "require": list(require)}
    return parse_plan(plan_doc(oracle=oracle_doc(check=check), failure_refutes=refutes))


def _cases(report: JunitReport) -> list[dict[str, object]]:
    """The report's canonical case list, decoded."""
    listed: list[dict[str, object]] = json.loads(decompress_case_list(report.cases))
    return listed


def _scratch_with(tmp_path: Path, data: bytes) -> Path:
    (tmp_path / "out").mkdir(exist_ok=True)
    (tmp_path / "out" / "report.xml").write_bytes(data)
    return tmp_path


class TestDecoder:
    def test_cases_keep_outcome_time_message_and_output(self) -> None:
        """Each test case is kept with its outcome, time, message and captured output."""
        report = decode_junit_report(REPORT)
        assert [(c["id"], c["outcome"], c["time"]) for c in _cases(report)] == [
            ("tests.test_calc::test_add", "passed", 0.002),
            ("tests.test_calc::test_div", "failed", 0.01),
            ("tests.test_calc::test_later", "skipped", 0.0),
        ]
        assert [c.message for c in report.not_passed] == ["ZeroDivisionError"]
        assert report.counts() == {"tests": 3, "passed": 1, "failed": 1, "error": 0, "skipped": 1}

    def test_the_case_list_is_canonical_json_of_every_case_and_its_digest(self) -> None:
        """The streamed case list is byte for byte canonical_json of the committed cases,
        and its recorded digest and size are those bytes'."""
        report = decode_junit_report(REPORT)
        data = decompress_case_list(report.cases)
        assert data == canonical_json(_cases(report))
        assert (report.cases.sha256, report.cases.size) == (sha256_hex(data), len(data))
        assert report.sha256 == sha256_hex(REPORT)

    def test_an_empty_report_has_an_empty_case_list(self) -> None:
        """No test case: the list is ``[]``, its digest that of ``[]``."""
        report = decode_junit_report(b"<testsuites/>")
        assert decompress_case_list(report.cases) == b"[]"

    def test_failing_cases_kept_whole_are_bounded_and_in_order(self) -> None:
        """Of many failures, the first MAX_LISTED_NOT_PASSED are kept with their output;
        every one is in the case list."""
        many = MAX_LISTED_NOT_PASSED + 7
        body = b"".join(
            b"<testcase name='t%d'><failure message='m'/><system-out>o</system-out></testcase>" % i
            for i in range(many)
        )
        report = decode_junit_report(b"<testsuite>" + body + b"</testsuite>")
        assert [c.id for c in report.not_passed] == [f"t{i}" for i in range(MAX_LISTED_NOT_PASSED)]
        assert report.not_passed[0].system_out == "o"
        assert len(_cases(report)) == report.failed == many

    def test_cases_are_dropped_as_they_are_read(self) -> None:
        """The decoder streams: after a case is read it is removed from its suite, so a
        report's tree never holds its cases (the fixed memory bound)."""
        import probe_service.plans.junit_report as module

        seen: list[int] = []
        real = module._case

        def spy(element: object) -> object:
            seen.append(len(list(parent)) if (parent := suites[-1]) is not None else -1)
            return real(element)  # type: ignore[arg-type]

        suites: list[object] = []
        original = module.iterparse

        def watching(*args: object, **kwargs: object) -> object:
            for event, element in original(*args, **kwargs):  # type: ignore[arg-type]
                if event == "start" and element.tag == "testsuite":
                    suites.append(element)
                yield event, element

        case = b"<testcase name='t'/>"
        data = b"<testsuite>" + case * 20_000 + b"</testsuite>"
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(module, "iterparse", watching)
            patch.setattr(module, "_case", spy)
            report = decode_junit_report(data)
        assert report.tests == 20_000
        # The suite holds at most the cases of one read step (parsed, not yet seen), never
        # the 20,000 of the document: the earlier ones were dropped.
        assert max(seen) <= (1 << 16) // len(case) + 2

    def test_doctype_is_refused_naming_the_report(self) -> None:
        """A DOCTYPE (the door to entity expansion and external references) is refused."""
        bomb = (
            b'<!DOCTYPE t [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]>'
            b"<testsuite><testcase name='&b;'/></testsuite>"
        )
        with pytest.raises(JunitReportInvalid, match=r"report.xml: refused: a DOCTYPE"):
            decode_junit_report(bomb, "report.xml")

    def test_external_entity_is_refused(self) -> None:
        """An XXE attempt reading a host file is refused before anything is resolved."""
        xxe = (
            b'<?xml version="1.0"?><!DOCTYPE t [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
            b"<testsuite><testcase name='&x;'/></testsuite>"
        )
        with pytest.raises(JunitReportInvalid, match=r"refused"):
            decode_junit_report(xxe)

    @pytest.mark.parametrize(
        "data",
        [
            b"\xef\xbb\xbf<!-- a comment first -->\n<!DOCTYPE t [<!ENTITY a 'x'>]><testsuite/>",
            "<!DOCTYPE t [<!ENTITY a 'x'>]><testsuite/>".encode("utf-16"),
            '<?xml version="1.0" encoding="UTF-16LE"?><!DOCTYPE t><testsuite/>'.encode("utf-16-le"),
            b"<?xml version='1.0'?><?pi x?><!DOCTYPE t SYSTEM 'file:///etc/shadow'><testsuite/>",
        ],
        ids=["utf8-bom-and-comment", "utf16-bom", "utf16le-declared", "after-a-pi"],
    )
    def test_doctype_behind_a_bom_comment_or_utf16_is_refused(self, data: bytes) -> None:
        """A DOCTYPE hidden after a BOM, a comment or a PI, or in UTF-16, is still refused."""
        with pytest.raises(JunitReportInvalid, match="DOCTYPE"):
            decode_junit_report(data, "r.xml")

    def test_nesting_as_deep_as_the_size_limit_allows_is_decoded(self) -> None:
        """A report nested ~500,000 elements deep is decoded (no recursion crash) and its
        one test case found."""
        depth = 500_000
        data = b"<testsuite>" + b"<a>" * depth + b'<testcase name="t"/>' + b"</a>" * depth
        data += b"</testsuite>"
        assert len(data) <= DEFAULT_JUNIT_MAX_BYTES
        assert [c["id"] for c in _cases(decode_junit_report(data))] == ["t"]

    def test_report_over_its_size_cap_is_refused_naming_the_cap_and_the_size(self) -> None:
        """A report larger than the policy's cap is refused naming both numbers."""
        big = b"<testsuite>" + b" " * 5000 + b"</testsuite>"
        with pytest.raises(
            JunitReportInvalid,
            match=f"report.xml: the report is {len(big)} bytes, over the policy's "
            "junit_max_bytes cap of 4096 bytes",
        ):
            decode_junit_report(big, "report.xml", JunitLimits(max_bytes=4096))

    def test_a_report_growing_past_the_cap_while_read_is_refused(self) -> None:
        """A stated size under the cap does not let more bytes through: reading stops."""
        from io import BytesIO

        from probe_service.plans.junit_report import read_junit_report

        big = b"<testsuite>" + b" " * 200_000 + b"</testsuite>"
        with pytest.raises(JunitReportInvalid, match=r"at least .* junit_max_bytes cap of 1024"):
            read_junit_report(BytesIO(big), "r.xml", JunitLimits(max_bytes=1024), size=10)

    def test_too_many_cases_are_refused_naming_the_cap_and_the_count(self) -> None:
        """More test cases than the cap are refused, naming the cap and how many."""
        many = b"<testsuite>" + b"<testcase name='t'/>" * 12 + b"</testsuite>"
        with pytest.raises(
            JunitReportInvalid,
            match="holds 12 test cases, over the policy's junit_max_cases cap of 10",
        ):
            decode_junit_report(many, limits=JunitLimits(max_cases=10))

    def test_the_default_caps_take_a_100000_case_suite(self) -> None:
        """A 100,000-case report (with failures) decodes under the default caps."""
        case = b"<testcase classname='pkg.test_mod' name='test_%d' time='0.001'/>"
        failing = (
            b"<testcase classname='pkg.test_mod' name='f%d'><failure message='no'/></testcase>"
        )
        body = b"".join((failing if i % 1000 == 0 else case) % i for i in range(100_000))
        data = b"<testsuites><testsuite>" + body + b"</testsuite></testsuites>"
        report = decode_junit_report(data)
        assert DEFAULT_JUNIT_MAX_CASES == report.tests == 100_000
        assert report.failed == 100
        assert len(data) < DEFAULT_JUNIT_MAX_BYTES

    @pytest.mark.parametrize("data", [b"", b"<testsuite>", b"<html/>", b"\xff\xfe<a/>"])
    def test_malformed_reports_raise_the_one_error(self, data: bytes) -> None:
        """Anything that is not a JUnit document raises JunitReportInvalid."""
        with pytest.raises(JunitReportInvalid):
            decode_junit_report(data)

    def test_long_output_is_bounded(self) -> None:
        """Captured output is cut to its bound with a note saying how much was left out."""
        data = b"<testsuite><testcase name='t'><system-out>" + b"x" * 10_000
        data += b"</system-out></testcase></testsuite>"
        data = data.replace(b"<testcase name='t'>", b"<testcase name='t'><error/>")
        kept = decode_junit_report(data).not_passed[0].system_out
        assert len(kept) < 4200
        assert "more characters not kept" in kept


class TestVerdicts:
    def test_all_tests_must_pass_by_default(self, tmp_path: Path) -> None:
        """With no require list, one failure fails the check (refutes when declared so)."""
        verdict = evaluate_check(_plan(), 1, b"", _scratch_with(tmp_path, REPORT))
        assert (verdict.passed, verdict.error) == (False, False)
        assert verdict.junit is not None
        assert decide_outcome(_plan(), None, verdict).outcome == "refutes"

    def test_a_named_subset_may_pass(self, tmp_path: Path) -> None:
        """Requiring only the passing test supports, whatever the others did."""
        plan = _plan(require=("tests.test_calc::test_add",))
        verdict = evaluate_check(plan, 1, b"", _scratch_with(tmp_path, REPORT))
        assert verdict.passed
        assert decide_outcome(plan, None, verdict).outcome == "supports"

    def test_a_required_test_missing_from_the_report_is_inconclusive(self, tmp_path: Path) -> None:
        """A required test that did not run is an oracle error, never a refutation."""
        plan = _plan(require=("tests.test_calc::test_absent",))
        verdict = evaluate_check(plan, 0, b"", _scratch_with(tmp_path, REPORT))
        assert verdict.error
        assert decide_outcome(plan, None, verdict).outcome == "inconclusive"

    def test_a_report_with_no_test_fails(self, tmp_path: Path) -> None:
        """ "All tests pass" over zero tests is not a pass."""
        verdict = evaluate_check(_plan(), 0, b"", _scratch_with(tmp_path, b"<testsuites/>"))
        assert not verdict.passed

    def test_no_report_is_inconclusive(self, tmp_path: Path) -> None:
        """A probe that wrote no report (e.g. pytest missing) is an oracle error."""
        verdict = evaluate_check(_plan(), 1, b"", tmp_path)
        assert verdict.error
        assert "no JUnit report" in verdict.detail

    def test_oversized_report_in_scratch_is_inconclusive_naming_the_limit(
        self, tmp_path: Path
    ) -> None:
        """A report over the limit is not read whole and ends the check as an error."""
        scratch = _scratch_with(tmp_path, b"<testsuite>" + b" " * 3000)
        verdict = evaluate_check(_plan(), 0, b"", scratch, JunitLimits(max_bytes=2048))
        assert verdict.error
        assert verdict.detail == (
            "out/report.xml: the report is 3011 bytes, over the policy's junit_max_bytes "
            "cap of 2048 bytes"
        )
        assert decide_outcome(_plan(), None, verdict).reason == "oracle_error"

    def test_doctype_report_in_scratch_is_inconclusive(self, tmp_path: Path) -> None:
        """A report with a DOCTYPE is refused with a clear reason; the check errs."""
        scratch = _scratch_with(tmp_path, b"<!DOCTYPE t><testsuite/>")
        verdict = evaluate_check(_plan(), 0, b"", scratch)
        assert verdict.error
        assert "DOCTYPE" in verdict.detail

    def test_a_linked_report_is_not_followed(self, tmp_path: Path) -> None:
        """A report that is a link (say to a host file) is never read through."""
        (tmp_path / "out").mkdir()
        os.symlink("/etc/passwd", tmp_path / "out" / "report.xml")
        verdict = evaluate_check(_plan(), 0, b"", tmp_path)
        assert (verdict.error, verdict.junit) == (True, None)
        assert "root:" not in verdict.detail

    def test_a_linked_directory_on_the_reports_path_is_not_followed(self, tmp_path: Path) -> None:
        """``out`` made a link to a host directory: the report under it is never read."""
        host = tmp_path / "host"
        host.mkdir()
        (host / "report.xml").write_bytes(REPORT)
        scratch = tmp_path / "scratch"
        scratch.mkdir()
        (scratch / "out").symlink_to(host)
        verdict = evaluate_check(_plan(), 0, b"", scratch)
        assert (verdict.error, verdict.junit) == (True, None)

    def test_a_fifo_report_does_not_block_the_worker(self, tmp_path: Path) -> None:
        """A FIFO left at the report's path is an oracle error, not a hang."""
        (tmp_path / "out").mkdir()
        os.mkfifo(tmp_path / "out" / "report.xml")
        verdict = evaluate_check(_plan(), 0, b"", tmp_path)
        assert verdict.error
        assert "not a regular file" in verdict.detail

    def test_a_required_test_reported_twice_passes_only_if_every_instance_passed(
        self, tmp_path: Path
    ) -> None:
        """A report listing a required test as failed and then again as passed does not
        support: the last entry must not hide the failure."""
        twice = (
            b"<testsuite>"
            b'<testcase classname="c" name="t"><failure message="boom"/></testcase>'
            b'<testcase classname="c" name="t"/>'
            b"</testsuite>"
        )
        plan = _plan(require=("c::t",))
        verdict = evaluate_check(plan, 0, b"", _scratch_with(tmp_path, twice))
        assert not verdict.passed
        assert decide_outcome(plan, None, verdict).outcome != "supports"


class TestPlanField:
    def test_report_path_must_stay_in_scratch(self) -> None:
        """The report path obeys the scratch path rules (no '..', no absolute path)."""
        check = {"kind": "junit_xml", "path": "../report.xml"}
        with pytest.raises(Exception, match=r"oracle.check.path"):
            parse_plan(plan_doc(oracle=oracle_doc(check=check)))
