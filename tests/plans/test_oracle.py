"""Oracle rules: which source, verdict and runner result yield which outcome; each check kind."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from probe_service.plans import CheckVerdict, Plan, decide_outcome, evaluate_check, parse_plan
from probe_service.plans.oracle import MAX_SCRATCH_READ

from .conftest import ALL_SOURCES, TRUSTED_SOURCES, oracle_doc, plan_doc


def make_plan(
    check: dict[str, Any] | None = None,
    source: str = "user_requirement",
    failure_refutes: bool = False,
) -> Plan:
    reference = None if source == "model_inferred" else "issue #1"
    return parse_plan(
        plan_doc(oracle=oracle_doc(check, source, reference), failure_refutes=failure_refutes)
    )


PASSED = CheckVerdict(passed=True, detail="held")
FAILED = CheckVerdict(passed=False, detail="did not hold")
ERRORED = CheckVerdict(passed=False, detail="could not evaluate", error=True)

#: Runner results the trust rules must never turn into supports/refutes.
RUNNER_FAILURES = ("timeout", "output_limit", "canary_readable", "sandbox_unverified")

#: (trusted?, what happened, failure_refutes) -> (outcome, reason). The rule table itself.
RULES: dict[tuple[bool, str, bool], tuple[str, str]] = {
    (True, "passed", False): ("supports", "oracle_passed"),
    (True, "passed", True): ("supports", "oracle_passed"),
    (True, "failed", False): ("inconclusive", "oracle_failed"),
    (True, "failed", True): ("refutes", "oracle_failed"),
    (False, "passed", False): ("inconclusive", "model_inferred_oracle"),
    (False, "passed", True): ("inconclusive", "model_inferred_oracle"),
    (False, "failed", False): ("inconclusive", "oracle_failed"),
    (False, "failed", True): ("inconclusive", "oracle_failed"),
    **{
        (trusted, runner, refutes): ("inconclusive", runner)
        for trusted in (True, False)
        for runner in RUNNER_FAILURES
        for refutes in (True, False)
    },
}


def _cases() -> list[Any]:
    cases = []
    for source in ALL_SOURCES:
        for happened in ("passed", "failed", *RUNNER_FAILURES):
            for refutes in (False, True):
                expected = RULES[(source in TRUSTED_SOURCES, happened, refutes)]
                case_id = f"{source}-{happened}-{'refutes' if refutes else 'plain'}"
                cases.append(pytest.param(source, happened, refutes, expected, id=case_id))
    return cases


class TestDecideOutcome:
    def test_table_is_complete(self) -> None:
        """The table covers 5 sources x (passed, failed, 4 runner failures) x 2 flags."""
        assert len(_cases()) == 5 * 6 * 2

    @pytest.mark.parametrize(("source", "happened", "refutes", "expected"), _cases())
    def test_rule_table(
        self, source: str, happened: str, refutes: bool, expected: tuple[str, str]
    ) -> None:
        """Each source x verdict x failure_refutes gives the outcome the trust rules name."""
        plan = make_plan(source=source, failure_refutes=refutes)
        if happened in RUNNER_FAILURES:
            # A runner failure carries no verdict; one that somehow did must not count.
            for verdict in (None, PASSED, FAILED):
                decision = decide_outcome(plan, happened, verdict)
                assert (decision.outcome, decision.reason) == expected
            return
        decision = decide_outcome(plan, None, PASSED if happened == "passed" else FAILED)
        assert (decision.outcome, decision.reason) == expected

    @pytest.mark.parametrize("source", ALL_SOURCES)
    def test_oracle_error_is_inconclusive_even_when_failure_refutes(self, source: str) -> None:
        """A check that could not be evaluated never refutes, whatever the plan declared."""
        decision = decide_outcome(make_plan(source=source, failure_refutes=True), None, ERRORED)
        assert (decision.outcome, decision.reason) == ("inconclusive", "oracle_error")

    def test_no_runner_reason_and_no_verdict_is_inconclusive(self) -> None:
        """A run that produced neither a runner reason nor a verdict is inconclusive."""
        decision = decide_outcome(make_plan(failure_refutes=True), None, None)
        assert (decision.outcome, decision.reason) == ("inconclusive", "not_run")


def check_plan(check: dict[str, Any]) -> Plan:
    return make_plan(check)


class TestExitCodeCheck:
    def test_equal_passes(self) -> None:
        """The exit code equal to `equals` passes."""
        plan = check_plan({"kind": "exit_code", "equals": 3})
        assert evaluate_check(plan, 3, b"", Path("/nonexistent")).passed

    def test_different_fails(self) -> None:
        """Any other exit code fails (without an evaluation error)."""
        verdict = evaluate_check(check_plan({"kind": "exit_code", "equals": 0}), 1, b"", Path("/"))
        assert (verdict.passed, verdict.error) == (False, False)

    def test_no_exit_code_fails(self) -> None:
        """A probe that has no exit code (killed) never passes an exit code check."""
        plan = check_plan({"kind": "exit_code", "equals": 0})
        assert not evaluate_check(plan, None, b"", Path("/")).passed


class TestStdoutChecks:
    def test_equals_is_exact(self) -> None:
        """stdout_equals compares the whole output, trailing newline included."""
        plan = check_plan({"kind": "stdout_equals", "text": "hello"})
        assert evaluate_check(plan, 0, b"hello", Path("/")).passed
        assert not evaluate_check(plan, 0, b"hello\n", Path("/")).passed

    def test_equals_decodes_utf8(self) -> None:
        """stdout_equals compares decoded UTF-8 text."""
        plan = check_plan({"kind": "stdout_equals", "text": "caf\u00e9"})
        assert evaluate_check(plan, 0, "caf\u00e9".encode(), Path("/")).passed

    def test_invalid_utf8_never_equals_the_raw_text(self) -> None:
        """Undecodable output is replaced, so it cannot equal text spelled differently."""
        plan = check_plan({"kind": "stdout_equals", "text": "caf"})
        verdict = evaluate_check(plan, 0, b"caf\xff", Path("/"))
        assert (verdict.passed, verdict.error) == (False, False)

    def test_contains(self) -> None:
        """stdout_contains passes when the text occurs anywhere and fails otherwise."""
        plan = check_plan({"kind": "stdout_contains", "text": "needle"})
        assert evaluate_check(plan, 0, b"hay needle hay", Path("/")).passed
        assert not evaluate_check(plan, 0, b"hay hay", Path("/")).passed

    def test_regex_matches_anywhere(self) -> None:
        """stdout_regex searches, so a match in the middle passes."""
        plan = check_plan({"kind": "stdout_regex", "pattern": r"\[\d+, \d+\]"})
        assert evaluate_check(plan, 0, b"result: [4, 5]\n", Path("/")).passed

    def test_regex_no_match(self) -> None:
        """stdout_regex with no match fails without an evaluation error."""
        plan = check_plan({"kind": "stdout_regex", "pattern": r"^\d+$"})
        verdict = evaluate_check(plan, 0, b"abc", Path("/"))
        assert (verdict.passed, verdict.error) == (False, False)

    def test_invalid_pattern_is_an_oracle_error(self) -> None:
        """An invalid pattern is an evaluation error, so the outcome is oracle_error."""
        plan = make_plan({"kind": "stdout_regex", "pattern": "(unclosed"}, failure_refutes=True)
        verdict = evaluate_check(plan, 0, b"unclosed", Path("/"))
        assert verdict.error
        assert "invalid pattern" in verdict.detail
        decision = decide_outcome(plan, None, verdict)
        assert (decision.outcome, decision.reason) == ("inconclusive", "oracle_error")

    def test_catastrophic_backtracking_ends_as_oracle_error(self) -> None:
        """An exponential pattern ends as oracle_error/inconclusive instead of hanging."""
        plan = make_plan({"kind": "stdout_regex", "pattern": "(a|aa)+$"}, failure_refutes=True)
        verdict = evaluate_check(plan, 0, b"a" * 64 + b"!", Path("/"))
        assert verdict.error
        assert "timed out" in verdict.detail
        decision = decide_outcome(plan, None, verdict)
        assert (decision.outcome, decision.reason) == ("inconclusive", "oracle_error")


def scratch_plan(path: str = "out.txt", text: str = "expected") -> Plan:
    return check_plan({"kind": "scratch_file_equals", "path": path, "text": text})


class TestScratchFileEquals:
    def test_equal_file_passes(self, tmp_path: Path) -> None:
        """A scratch file holding exactly the text passes."""
        (tmp_path / "out.txt").write_bytes(b"expected")
        assert evaluate_check(scratch_plan(), 0, b"", tmp_path).passed

    def test_nested_file_passes(self, tmp_path: Path) -> None:
        """A file in a plain subdirectory of scratch is read."""
        (tmp_path / "d").mkdir()
        (tmp_path / "d" / "out.txt").write_bytes(b"expected")
        assert evaluate_check(scratch_plan("d/out.txt"), 0, b"", tmp_path).passed

    def test_different_content_fails(self, tmp_path: Path) -> None:
        """Content that differs by one trailing newline fails."""
        (tmp_path / "out.txt").write_bytes(b"expected\n")
        verdict = evaluate_check(scratch_plan(), 0, b"", tmp_path)
        assert (verdict.passed, verdict.error) == (False, False)

    def test_missing_file_fails(self, tmp_path: Path) -> None:
        """A missing file fails the check (the probe did not write it)."""
        verdict = evaluate_check(scratch_plan(), 0, b"", tmp_path)
        assert verdict.passed is False
        assert "out.txt" in verdict.detail

    def test_symlink_is_not_followed(self, tmp_path: Path) -> None:
        """A link the probe left in scratch is not followed, even to the right content."""
        scratch, outside = tmp_path / "scratch", tmp_path / "outside"
        scratch.mkdir()
        outside.mkdir()
        (outside / "out.txt").write_bytes(b"expected")
        (scratch / "out.txt").symlink_to(outside / "out.txt")
        assert not evaluate_check(scratch_plan(), 0, b"", scratch).passed

    def test_symlinked_directory_is_not_followed(self, tmp_path: Path) -> None:
        """A linked directory in scratch cannot make the oracle read a host file."""
        scratch, outside = tmp_path / "scratch", tmp_path / "outside"
        scratch.mkdir()
        outside.mkdir()
        (outside / "secret").write_bytes(b"expected")
        (scratch / "d").symlink_to(outside)
        assert not evaluate_check(scratch_plan("d/secret"), 0, b"", scratch).passed

    def test_fifo_does_not_block(self, tmp_path: Path) -> None:
        """A FIFO the probe left at the path fails the check instead of blocking the worker."""
        os.mkfifo(tmp_path / "out.txt")
        verdict = evaluate_check(scratch_plan(), 0, b"", tmp_path)
        assert verdict.passed is False
        assert "not a regular file" in verdict.detail

    def test_directory_fails(self, tmp_path: Path) -> None:
        """A directory at the path fails the check."""
        (tmp_path / "out.txt").mkdir()
        assert not evaluate_check(scratch_plan(), 0, b"", tmp_path).passed

    def test_oversized_file_fails(self, tmp_path: Path) -> None:
        """A file larger than the read bound fails rather than being read whole."""
        (tmp_path / "out.txt").write_bytes(b"x" * (MAX_SCRATCH_READ + 1))
        verdict = evaluate_check(scratch_plan(text="x"), 0, b"", tmp_path)
        assert verdict.passed is False
        assert "larger" in verdict.detail
