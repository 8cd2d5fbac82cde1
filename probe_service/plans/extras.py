"""The receipt fields only some runs have: toolchains, preflight, JUnit, refusals and the
denial hint.

Each is given only when the run has it, so a receipt of a plan and policy that use none
keeps exactly the shape (and the fields) it had before they existed.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..sandbox import SandboxResult
from ..toolchains import ResolvedToolchain
from .oracle import CheckVerdict
from .receipt_parts import (
    DenialHint,
    JunitCase,
    JunitOutput,
    JunitV2,
    KeptStreams,
    Preflight,
    Refusal,
    Toolchain,
)
from .refusals import Refusal as RunRefusal

__all__ = ["RunExtras", "run_extras"]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@dataclass(frozen=True)
class RunExtras:
    """The optional fields one run has, by field name: committed and operational."""

    committed: dict[str, Any] = field(default_factory=dict)
    operational: dict[str, Any] = field(default_factory=dict)


def run_extras(
    *,
    toolchains: Sequence[ResolvedToolchain],
    hint: dict[str, object] | None,
    result: SandboxResult,
    verdict: CheckVerdict | None,
    refusals: Sequence[RunRefusal] = (),
) -> RunExtras:
    """The optional committed and operational fields of one run, only those it has."""
    extras = RunExtras()
    committed, operational = extras.committed, extras.operational
    if toolchains:
        # docs/ARCHITECTURE.md, "Toolchains": the receipt names each tree and its digest.
        committed["toolchains"] = tuple(
            Toolchain.model_validate(t.receipt_entry()) for t in toolchains
        )
    if result.preflight:
        # docs/ARCHITECTURE.md, "Preflight": commands and output digests are committed;
        # the output itself is kept beside the receipt, like the probe's.
        committed["preflight"] = tuple(
            Preflight.model_validate(c.committed()) for c in result.preflight
        )
        operational["preflight_output"] = tuple(
            KeptStreams(stdout_b64=_b64(c.stdout), stderr_b64=_b64(c.stderr))
            for c in result.preflight
        )
    report = verdict.junit if verdict is not None else None
    if report is not None:
        # docs/ARCHITECTURE.md, "JUnit oracle": the report's digest, its counts, the
        # digest of every case's outcome (the case list, a blob) and the first failing
        # cases are committed; their captured output is kept operationally, bounded.
        committed["junit"] = JunitV2(
            report_sha256=report.sha256,
            **report.counts(),
            cases_sha256=report.cases.sha256,
            not_passed=tuple(JunitCase.model_validate(c.committed()) for c in report.not_passed),
        )
        kept = tuple(
            JunitOutput(id=case.id, system_out=case.system_out, system_err=case.system_err)
            for case in report.not_passed
            if case.system_out or case.system_err
        )
        if kept:
            operational["junit_output"] = kept
    if refusals:
        # docs/ARCHITECTURE.md, "Trust rules": the refusals a failed check was made
        # inconclusive by are part of what the outcome rests on.
        committed["refusals"] = tuple(Refusal.model_validate(r.model_dump()) for r in refusals)
    if hint is not None:
        operational["possible_sandbox_denial"] = DenialHint.model_validate(hint)
    return extras
