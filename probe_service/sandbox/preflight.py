"""Preflight commands: a plan's checks that its prerequisites hold, run before the probe.

docs/ARCHITECTURE.md, "Preflight": each command runs in the same sandbox, under the same
policy, settings, identity, limits and disposable tree as the probe, one after another;
the first that does not exit 0 ends the run ``inconclusive`` / ``preflight_failed`` with
its output in the receipt -- a missing dependency is never a refutation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..policies import ExecutableIdentity
from ..safe_text import safe_line
from .results import PreflightResult

__all__ = ["describe_failure", "preflight_result"]


def preflight_result(
    declared: Sequence[str], identity: ExecutableIdentity, finished: Mapping[str, object]
) -> PreflightResult:
    """Build one command's result from the runner's finished fields (status, output...)."""
    fields = {
        key: finished[key]
        for key in ("status", "exit_code", "stdout", "stderr", "stdout_sha256", "stderr_sha256")
        if key in finished
    }
    if finished.get("reason"):
        fields["status"] = f"inconclusive:{finished['reason']}"
    return PreflightResult.model_validate(
        {
            **fields,
            "argv": tuple(declared),
            "executable": identity,
            "elapsed_seconds": finished.get("probe_elapsed_seconds"),
        }
    )


def describe_failure(result: PreflightResult) -> str:
    """One line naming the failed command and how it ended."""
    command = safe_line(" ".join(result.argv))[:200]
    if result.status != "ok":
        return f"preflight {command!r} did not complete ({result.status})"
    return f"preflight {command!r} exited {result.exit_code}"
