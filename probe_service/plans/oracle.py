"""Oracle evaluation: a check's verdict, then the trust rules that turn it into an outcome.

ARCHITECTURE "Trust rules": only the four declared sources with a reference can yield
supports/refutes; ``model_inferred`` stays inconclusive even when its check passes; a
failed check is inconclusive unless the plan declared that failure refutes; a sandbox or
bootstrap failure stays inconclusive even then, and so does a failed check on a run the
sandbox refused something (``sandbox_denied``) or a host-wide table was full
(``host_resource``).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import regex
from pydantic import BaseModel, ConfigDict, Field

from ..errors import JunitReportInvalid
from .junit_report import JunitLimits, JunitReport, read_junit_report
from .models import (
    TRUSTED_SOURCES,
    ExitCodeCheck,
    JunitXmlCheck,
    Plan,
    ScratchFileEqualsCheck,
    StdoutContainsCheck,
    StdoutEqualsCheck,
    StdoutRegexCheck,
)
from .refusals import Refusal, refusal_reason

__all__ = ["DECISION_RULES", "CheckVerdict", "Decision", "decide_outcome", "evaluate_check"]

#: The version of the rules ``decide_outcome`` applies; part of every action key, so a
#: receipt decided under older rules never answers a later run (docs/ARCHITECTURE.md,
#: "Trust rules"). 1: the rules before they were versioned (keys without the field).
#: 2: a failed check on a run with a recognized refusal is ``sandbox_denied`` or
#: ``host_resource``. Bump once per release that changes a rule, never once per change.
DECISION_RULES = 2

Outcome = Literal["supports", "refutes", "inconclusive"]

#: A regex gets this long before the check counts as failed-to-evaluate.
REGEX_TIMEOUT_S = 1.0
#: Largest scratch file the oracle reads back.
MAX_SCRATCH_READ = 1 << 20


class CheckVerdict(BaseModel):
    """Whether the check held; ``error`` when it could not be evaluated at all."""

    model_config = ConfigDict(frozen=True)
    passed: bool
    detail: str
    error: bool = False
    #: The decoded report of a ``junit_xml`` check; the receipt commits to it apart from
    #: the verdict (docs/ARCHITECTURE.md, "JUnit oracle").
    junit: JunitReport | None = Field(default=None, exclude=True)


class Decision(BaseModel):
    """The oracle's outcome, the machine-readable reason for it, and the refusals it
    rests on when they made a failed check inconclusive."""

    model_config = ConfigDict(frozen=True)
    outcome: Outcome
    reason: str
    refusals: tuple[Refusal, ...] = ()


def evaluate_check(
    plan: Plan,
    exit_code: int | None,
    stdout: bytes,
    scratch: Path,
    junit_limits: JunitLimits = JunitLimits(),  # noqa: B008 - frozen, never mutated
) -> CheckVerdict:
    """Evaluate the plan's check against what the probe produced (a ``junit_xml``
    report under the policy's ``junit_limits``)."""
    check = plan.oracle.check
    if isinstance(check, ExitCodeCheck):
        return CheckVerdict(passed=exit_code == check.equals, detail=f"exit code {exit_code}")
    text = stdout.decode("utf-8", "replace")
    if isinstance(check, StdoutEqualsCheck):
        return CheckVerdict(passed=text == check.text, detail="stdout compared exactly")
    if isinstance(check, StdoutContainsCheck):
        return CheckVerdict(passed=check.text in text, detail="stdout searched for text")
    if isinstance(check, StdoutRegexCheck):
        return _regex_verdict(check.pattern, text)
    if isinstance(check, JunitXmlCheck):
        return _junit_verdict(scratch, check, junit_limits)
    assert isinstance(check, ScratchFileEqualsCheck)  # noqa: S101 - the union is closed
    return _scratch_verdict(scratch, check.path, check.text)


def _regex_verdict(pattern: str, text: str) -> CheckVerdict:
    try:
        found = regex.search(pattern, text, timeout=REGEX_TIMEOUT_S)
    except regex.error as exc:
        return CheckVerdict(passed=False, detail=f"invalid pattern: {exc}", error=True)
    except TimeoutError:
        return CheckVerdict(passed=False, detail="pattern timed out", error=True)
    return CheckVerdict(passed=found is not None, detail="stdout matched against pattern")


_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO left by the probe must not block the worker in open() or read().
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _open_in_scratch(scratch: Path, rel: str) -> int:
    """Open ``scratch/rel`` walking each component without links; raises OSError."""
    parts = rel.split("/")
    fd = os.open(scratch, _DIR)
    try:
        for part in parts[:-1]:
            child = os.open(part, _DIR, dir_fd=fd)
            os.close(fd)
            fd = child
        return os.open(parts[-1], _FILE, dir_fd=fd)
    finally:
        os.close(fd)


def _read_scratch(scratch: Path, rel: str, limit: int) -> bytes | str:
    """Read at most ``limit`` + 1 bytes of a scratch file, never following links; a str
    says why it could not be read (the probe controlled that directory)."""
    try:
        fd = _open_in_scratch(scratch, rel)
    except OSError as exc:
        return f"{rel}: {exc.strerror}"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return f"{rel}: not a regular file"
        chunks, size = [], 0
        while size <= limit and (chunk := os.read(fd, min(1 << 20, limit + 1 - size))):
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _scratch_verdict(scratch: Path, rel: str, expected: str) -> CheckVerdict:
    data = _read_scratch(scratch, rel, MAX_SCRATCH_READ)
    if isinstance(data, str):
        return CheckVerdict(passed=False, detail=data)
    if len(data) > MAX_SCRATCH_READ:
        return CheckVerdict(passed=False, detail=f"{rel}: larger than {MAX_SCRATCH_READ} bytes")
    return CheckVerdict(passed=data == expected.encode("utf-8"), detail=f"{rel} compared exactly")


def _junit_verdict(scratch: Path, check: JunitXmlCheck, limits: JunitLimits) -> CheckVerdict:
    """docs/ARCHITECTURE.md, "JUnit oracle": a missing, oversized or unsafe report is an
    oracle error (inconclusive), never a refutation; the report is read streaming."""
    try:
        fd = _open_in_scratch(scratch, check.path)
    except OSError as exc:
        detail = f"no JUnit report: {check.path}: {exc.strerror}"
        return CheckVerdict(passed=False, detail=detail, error=True)
    with os.fdopen(fd, "rb", buffering=0) as source:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            detail = f"no JUnit report: {check.path}: not a regular file"
            return CheckVerdict(passed=False, detail=detail, error=True)
        try:
            report = read_junit_report(source, check.path, limits, check.require, info.st_size)
        except JunitReportInvalid as exc:
            return CheckVerdict(passed=False, detail=str(exc), error=True)
    # A test id reported more than once counts at its worst instance: a later "passed"
    # entry must not hide a failure (docs/ARCHITECTURE.md, "JUnit oracle").
    outcomes = report.required
    counts = report.counts()
    summary = ", ".join(f"{counts[k]} {k}" for k in ("passed", "failed", "error", "skipped"))
    absent = [test for test in check.require if test not in outcomes]
    if absent:
        # A test that did not run says nothing about the hypothesis.
        detail = f"required test(s) not in the report: {', '.join(absent[:5])}"
        return CheckVerdict(passed=False, detail=detail, error=True, junit=report)
    if check.require:
        missing = [test for test in check.require if outcomes.get(test) != "passed"]
        detail = f"{len(check.require) - len(missing)} of {len(check.require)} required passed"
        if missing:
            detail += f"; not passed: {', '.join(missing[:5])}"
        return CheckVerdict(passed=not missing, detail=detail, junit=report)
    passed = counts["passed"] > 0 and counts["failed"] == counts["error"] == 0
    return CheckVerdict(passed=passed, detail=f"{counts['tests']} tests: {summary}", junit=report)


def decide_outcome(
    plan: Plan,
    runner_reason: str | None,
    verdict: CheckVerdict | None,
    refusals: Sequence[Refusal] = (),
) -> Decision:
    """Apply the trust rules: runner failures, oracle sources, recognized refusals and
    ``failure_refutes``.

    ``runner_reason`` is None only when the probe ran to completion under the sandbox.
    ``refusals`` are consulted only once the check has failed: they may come from the
    probe's own text, so they can make a failure inconclusive and nothing else.
    """
    if runner_reason is not None or verdict is None:
        return Decision(outcome="inconclusive", reason=runner_reason or "not_run")
    if verdict.error:
        return Decision(outcome="inconclusive", reason="oracle_error")
    trusted = plan.oracle.source in TRUSTED_SOURCES
    if verdict.passed:
        if trusted:
            return Decision(outcome="supports", reason="oracle_passed")
        return Decision(outcome="inconclusive", reason="model_inferred_oracle")
    if refusals:
        reason = refusal_reason(refusals)
        return Decision(outcome="inconclusive", reason=reason, refusals=tuple(refusals))
    if trusted and plan.failure_refutes:
        return Decision(outcome="refutes", reason="oracle_failed")
    return Decision(outcome="inconclusive", reason="oracle_failed")
