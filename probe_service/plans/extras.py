"""The receipt fields only some runs have: toolchains, preflight, JUnit, refusals and the
denial hint.

Each is added only when the run has it, so a receipt of a plan and policy that use none
keeps exactly the shape (and the fields) it had before they existed.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from ..sandbox import SandboxResult
from ..toolchains.resolve import ResolvedToolchain
from .oracle import CheckVerdict
from .refusals import Refusal

__all__ = ["add_run_extras"]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def add_run_extras(
    committed: dict[str, Any],
    operational: dict[str, Any],
    *,
    toolchains: Sequence[ResolvedToolchain],
    hint: dict[str, object] | None,
    result: SandboxResult,
    verdict: CheckVerdict | None,
    refusals: Sequence[Refusal] = (),
) -> None:
    """Add the optional committed and operational fields of one run, in place."""
    if toolchains:
        # docs/ARCHITECTURE.md, "Toolchains": the receipt names each tree and its digest.
        committed["toolchains"] = [toolchain.receipt_entry() for toolchain in toolchains]
    if result.preflight:
        # docs/ARCHITECTURE.md, "Preflight": commands and output digests are committed;
        # the output itself is kept beside the receipt, like the probe's.
        committed["preflight"] = [command.committed() for command in result.preflight]
        operational["preflight_output"] = [
            {"stdout_b64": _b64(command.stdout), "stderr_b64": _b64(command.stderr)}
            for command in result.preflight
        ]
    report = verdict.junit if verdict is not None else None
    if report is not None:
        # docs/ARCHITECTURE.md, "JUnit oracle": the report's digest and every case's
        # outcome are committed; captured output is kept operationally, bounded.
        committed["junit"] = {
            "report_sha256": report.sha256,
            **report.counts(),
            "cases": [case.committed() for case in report.cases],
        }
        operational["junit_output"] = [
            {"id": case.id, "system_out": case.system_out, "system_err": case.system_err}
            for case in report.cases
            if case.system_out or case.system_err
        ]
    if refusals:
        # docs/ARCHITECTURE.md, "Trust rules": the refusals a failed check was made
        # inconclusive by are part of what the outcome rests on.
        committed["refusals"] = [refusal.model_dump() for refusal in refusals]
    if hint is not None:
        operational["possible_sandbox_denial"] = hint
