"""What a person is shown of one receipt, as data, under one set of field names.

``run``, ``receipt show`` and ``submit`` print these fields for a person; ``run --json``,
``receipt show --json``, ``submit --json``, ``probe_run`` and ``receipt_get`` on every face
carry the same fields under the same names (docs/ARCHITECTURE.md, "Saying why"), so an
agent reading JSON learns which link, limit, report or oracle error made a run
``inconclusive``. The receipt stays the evidence: this is read from it, never stored; its
fields are typed by its model (a malformed receipt is refused before it gets here), and
their text is still untrusted data.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from .phases import phase_seconds
from .receipt_model import Operational, Receipt
from .receipt_parts import Check, CommittedConfirmation, Junit, JunitV2

__all__ = [
    "MAX_LISTED_CASES",
    "CheckSummary",
    "JunitSummary",
    "PreflightSummary",
    "ReceiptSummary",
    "RefusalSummary",
    "summarize_receipt",
    "summary_json",
]

#: JUnit cases that did not pass, listed by id and message (the counts cover them all).
MAX_LISTED_CASES = 20


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class CheckSummary(_Frozen):
    """The oracle's check: whether it held, and why (an ``oracle_error``'s cause)."""

    passed: bool
    detail: str
    error: bool


class PreflightSummary(_Frozen):
    argv: tuple[str, ...]
    status: str | None
    exit_code: int | None


class ToolchainSummary(_Frozen):
    name: str
    sha256: str


class JunitCase(_Frozen):
    id: str
    outcome: str
    message: str


class JunitSummary(_Frozen):
    tests: int
    passed: int
    failed: int
    error: int
    skipped: int
    #: The first MAX_LISTED_CASES cases that failed or erred.
    not_passed: tuple[JunitCase, ...]


class ConfirmationSummary(_Frozen):
    """Whether a refutation was reproduced (docs/ARCHITECTURE.md, "Confirming a refutation")."""

    state: str
    required: bool | None = None
    #: ``same_worker`` or ``another_worker``; absent when confirmation was off.
    on: str | None = None
    #: What the second execution decided.
    outcome: str | None = None
    reason: str | None = None
    #: The worker that ran the second execution (operational).
    worker: str | None = None


class RefusalSummary(_Frozen):
    """What the sandbox refused a run whose failed check it made inconclusive
    (docs/ARCHITECTURE.md, "Trust rules")."""

    kind: str
    operation: str
    target: str | None
    evidence: str
    fix: str


class ReceiptSummary(_Frozen):
    """The fields ``run`` and ``receipt show`` print, read from one receipt."""

    receipt_sha256: str
    plan_id: str
    snapshot_id: str
    policy_id: str
    outcome: str
    reason: str
    status: str
    exit_code: int | None
    #: Why the run ended as it did (the runner's or the refusal's words: a link, a limit).
    detail: str = ""
    check: CheckSummary | None = None
    elapsed_us: int | None = None
    wall_seconds: float | None = None
    #: The probe's memory high-water mark in bytes (operational; docs/ARCHITECTURE.md,
    #: "Limits"), beside the committed ``limits_applied.memory_bytes`` it ran under.
    memory_peak_bytes: int | None = None
    #: Seconds per phase (docs/ARCHITECTURE.md, "Phase timings").
    phases: dict[str, float] = {}
    #: The limits in force and what enforced each, as committed.
    limits_applied: dict[str, Any] | None = None
    toolchains: tuple[ToolchainSummary, ...] = ()
    preflight: tuple[PreflightSummary, ...] = ()
    junit: JunitSummary | None = None
    confirmation: ConfirmationSummary | None = None
    #: What the sandbox refused, when that made a failed check inconclusive (committed).
    refusals: tuple[RefusalSummary, ...] = ()
    #: Paths a failing probe named outside the policy's grants (advice, never committed).
    possible_sandbox_denial: tuple[str, ...] = ()


def summarize_receipt(receipt: Receipt) -> dict[str, Any]:
    """The summary fields of ``receipt`` (``ReceiptSummary``'s, as keyword values)."""
    committed, operational = receipt.committed, receipt.operational
    hint = operational.possible_sandbox_denial
    summary = ReceiptSummary(
        receipt_sha256=receipt.receipt_sha256,
        plan_id=committed.plan_id,
        snapshot_id=committed.snapshot_id,
        policy_id=committed.policy_id,
        outcome=committed.outcome,
        reason=committed.reason,
        status=committed.status,
        exit_code=committed.exit_code,
        detail=operational.detail or "",
        check=_check(committed.check),
        elapsed_us=committed.elapsed_us,
        wall_seconds=None if operational.wall_seconds is None else float(operational.wall_seconds),
        memory_peak_bytes=operational.memory_peak_bytes,
        phases=phase_seconds(receipt),
        limits_applied=None
        if committed.limits_applied is None
        else committed.limits_applied.to_json(),
        toolchains=tuple(
            ToolchainSummary(name=t.name, sha256=t.sha256) for t in committed.toolchains or ()
        ),
        preflight=tuple(
            PreflightSummary(argv=p.argv, status=p.status, exit_code=p.exit_code)
            for p in committed.preflight or ()
        ),
        junit=_junit(committed.junit),
        confirmation=_confirmation(committed.confirmation, operational.confirmation),
        refusals=tuple(
            RefusalSummary(**r.to_json()) for r in (committed.refusals or ())[:MAX_LISTED_CASES]
        ),
        possible_sandbox_denial=hint.paths if hint is not None else (),
    )
    return {name: getattr(summary, name) for name in ReceiptSummary.model_fields}


def _confirmation(
    confirmation: CommittedConfirmation | None, kept: Operational | None
) -> ConfirmationSummary | None:
    if confirmation is None:
        return None
    return ConfirmationSummary(
        state=confirmation.state,
        required=confirmation.required,
        on=confirmation.on,
        outcome=confirmation.outcome,
        reason=confirmation.reason,
        worker=None if kept is None else kept.worker,
    )


def _check(check: Check | None) -> CheckSummary | None:
    if check is None:
        return None
    return CheckSummary(passed=check.passed, detail=check.detail, error=check.error)


def _junit(report: Junit | JunitV2 | None) -> JunitSummary | None:
    if report is None:
        return None
    # Version 1 holds every case; version 2 its first failing ones (the rest are in the
    # case list, docs/ARCHITECTURE.md, "JUnit oracle").
    cases = report.cases if isinstance(report, Junit) else report.not_passed
    failing = [c for c in cases if c.outcome in ("failed", "error")]
    return JunitSummary(
        tests=report.tests,
        passed=report.passed,
        failed=report.failed,
        error=report.error,
        skipped=report.skipped,
        not_passed=tuple(
            JunitCase(id=c.id, outcome=c.outcome, message=c.message)
            for c in failing[:MAX_LISTED_CASES]
        ),
    )


def summary_json(receipt: Receipt) -> dict[str, Any]:
    """The summary fields of ``receipt`` as JSON values."""
    return ReceiptSummary(**summarize_receipt(receipt)).model_dump(mode="json")
