"""What a person is shown of one receipt, as data, under one set of field names.

``run``, ``receipt show`` and ``submit`` print these fields for a person; ``run --json``,
``receipt show --json``, ``submit --json``, ``probe_run`` and ``receipt_get`` on every face
carry the same fields under the same names (docs/ARCHITECTURE.md, "Saying why"), so an
agent reading JSON learns which link, limit, report or oracle error made a run
``inconclusive``. The receipt stays the evidence: this is read from it, never stored, and
a stored receipt's fields are read as untrusted data (malformed ones are left out).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from .phases import phase_seconds

__all__ = [
    "MAX_LISTED_CASES",
    "CheckSummary",
    "JunitSummary",
    "PreflightSummary",
    "ReceiptSummary",
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
    #: Seconds per phase (docs/ARCHITECTURE.md, "Phase timings").
    phases: dict[str, float] = {}
    #: The limits in force and what enforced each, as committed.
    limits_applied: dict[str, Any] | None = None
    toolchains: tuple[ToolchainSummary, ...] = ()
    preflight: tuple[PreflightSummary, ...] = ()
    junit: JunitSummary | None = None
    confirmation: ConfirmationSummary | None = None
    #: Paths a failing probe named outside the policy's grants (advice, never committed).
    possible_sandbox_denial: tuple[str, ...] = ()


def summarize_receipt(receipt: Mapping[str, Any]) -> dict[str, Any]:
    """The summary fields of ``receipt`` (``ReceiptSummary``'s, as keyword values)."""
    committed = _mapping(receipt.get("committed"))
    operational = _mapping(receipt.get("operational"))
    hint = _mapping(operational.get("possible_sandbox_denial"))
    summary = ReceiptSummary(
        receipt_sha256=str(receipt.get("receipt_sha256", "")),
        plan_id=str(committed.get("plan_id", "")),
        snapshot_id=str(committed.get("snapshot_id", "")),
        policy_id=str(committed.get("policy_id", "")),
        outcome=str(committed.get("outcome", "")),
        reason=str(committed.get("reason", "")),
        status=str(committed.get("status", "")),
        exit_code=_int(committed.get("exit_code")),
        detail=str(operational.get("detail") or ""),
        check=_check(committed.get("check")),
        elapsed_us=_int(committed.get("elapsed_us")),
        wall_seconds=_number(operational.get("wall_seconds")),
        phases=phase_seconds(receipt),
        limits_applied=committed.get("limits_applied")
        if isinstance(committed.get("limits_applied"), dict)
        else None,
        toolchains=tuple(_toolchain(t) for t in _list(committed.get("toolchains"))),
        preflight=tuple(_preflight(p) for p in _list(committed.get("preflight"))),
        junit=_junit(committed.get("junit")),
        confirmation=_confirmation(committed.get("confirmation"), operational.get("confirmation")),
        possible_sandbox_denial=tuple(str(p) for p in _list(hint.get("paths"))),
    )
    return {name: getattr(summary, name) for name in ReceiptSummary.model_fields}


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _confirmation(value: object, kept: object) -> ConfirmationSummary | None:
    confirmation = _mapping(value)
    if not confirmation:
        return None
    required = confirmation.get("required")
    return ConfirmationSummary(
        state=str(confirmation.get("state", "")),
        required=required if isinstance(required, bool) else None,
        on=_text(confirmation.get("on")),
        outcome=_text(confirmation.get("outcome")),
        reason=_text(confirmation.get("reason")),
        worker=_text(_mapping(kept).get("worker")),
    )


def _check(value: object) -> CheckSummary | None:
    check = _mapping(value)
    if not check:
        return None
    return CheckSummary(
        passed=check.get("passed") is True,
        detail=str(check.get("detail") or ""),
        error=check.get("error") is True,
    )


def _toolchain(value: object) -> ToolchainSummary:
    item = _mapping(value)
    return ToolchainSummary(name=str(item.get("name", "")), sha256=str(item.get("sha256", "")))


def _preflight(value: object) -> PreflightSummary:
    item = _mapping(value)
    return PreflightSummary(
        argv=tuple(str(arg) for arg in _list(item.get("argv"))),
        status=None if item.get("status") is None else str(item.get("status")),
        exit_code=_int(item.get("exit_code")),
    )


def _junit(value: object) -> JunitSummary | None:
    report = _mapping(value)
    if not report:
        return None
    cases = [_mapping(c) for c in _list(report.get("cases"))]
    failing = [c for c in cases if c.get("outcome") in ("failed", "error")]
    return JunitSummary(
        tests=_int(report.get("tests")) or 0,
        passed=_int(report.get("passed")) or 0,
        failed=_int(report.get("failed")) or 0,
        error=_int(report.get("error")) or 0,
        skipped=_int(report.get("skipped")) or 0,
        not_passed=tuple(
            JunitCase(
                id=str(c.get("id", "")),
                outcome=str(c.get("outcome")),
                message=str(c.get("message") or ""),
            )
            for c in failing[:MAX_LISTED_CASES]
        ),
    )


def summary_json(receipt: Mapping[str, Any]) -> dict[str, Any]:
    """The summary fields of ``receipt`` as JSON values."""
    return ReceiptSummary(**summarize_receipt(receipt)).model_dump(mode="json")
