"""A failed run's refusals, and the ``possible_sandbox_denial`` hint built from them.

docs/ARCHITECTURE.md, "Saying why": a denied read looks like an ordinary test failure
(``No module named pytest``, ``Permission denied``). When a probe (or a preflight
command) fails, the refusals ``refusals.recognize_refusals`` finds in its output, with
what the runner observed, decide a failed check (``sandbox_denied``, ``host_resource``);
the paths among them also go into the receipt's operational part as a hint for a person.
Both come from the one list, so the hint and the verdict never disagree.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..policies import Policy
from ..sandbox import SYSTEM_READ_PATHS, SandboxResult
from ..toolchains import ResolvedToolchain
from .host_tables import TableReading
from .oracle import CheckVerdict
from .refusals import MAX_REFUSALS, Refusal, RunFacts, recognize_refusals

__all__ = ["MAX_HINT_PATHS", "RunRefusals", "denial_hint", "run_facts", "run_refusals"]

#: Most paths one hint names.
MAX_HINT_PATHS = MAX_REFUSALS
#: Readable in every sandbox besides the grants: the run's own ``/proc``.
_ALWAYS_READABLE = ("/proc",)


@dataclass(frozen=True)
class RunRefusals:
    """What one run was refused, and the operational hint made of it."""

    refusals: tuple[Refusal, ...] = ()
    hint: dict[str, object] | None = None


def run_facts(
    policy: Policy,
    result: SandboxResult,
    workdir: Path,
    toolchains: Sequence[ResolvedToolchain],
    full_tables: Sequence[TableReading] = (),
) -> RunFacts:
    """The facts of a run under ``policy`` in ``workdir`` (its ``snapshot`` and
    ``scratch``) with ``toolchains``, and the host tables found full while it ran."""
    real = Path(os.path.realpath(workdir))
    scratch = str(real / "scratch")
    source = str(real / "snapshot")
    readable = [*SYSTEM_READ_PATHS, *_ALWAYS_READABLE, source, *(t.path for t in toolchains)]
    for executable in (result.executable, *(p.executable for p in result.preflight)):
        if executable is not None:
            readable.append(str(Path(executable.path).parent))
    return RunFacts(
        policy_id=policy.id,
        allowed_domains=tuple(policy.allowed_domains),
        readable=tuple(readable),
        writable=(scratch,),
        source=source,
        full_tables=tuple(full_tables),
    )


def _failed_output(result: SandboxResult, verdict: CheckVerdict | None) -> list[bytes] | None:
    """The output of what failed: a failed preflight command's, else the probe's when its
    check did not pass or it did not run to completion; None when nothing failed."""
    failed_preflight = [r for r in result.preflight if not r.passed]
    if failed_preflight:
        return [b for r in failed_preflight for b in (r.stdout, r.stderr)]
    if result.status == "ok" and verdict is not None and verdict.passed:
        return None
    return [result.stdout, result.stderr]


def run_refusals(
    result: SandboxResult, verdict: CheckVerdict | None, facts: RunFacts
) -> RunRefusals:
    """The refusals of a run whose check did not pass (or whose preflight failed), with
    their hint; nothing for a run whose check passed, whatever it printed."""
    output = _failed_output(result, verdict)
    if output is None:
        return RunRefusals()
    refusals = recognize_refusals(output, facts)
    return RunRefusals(refusals, denial_hint(refusals))


def denial_hint(refusals: Sequence[Refusal]) -> dict[str, object] | None:
    """``{"paths": [...], "reads": [...], "writes": [...]}`` of the refused paths, or None."""
    reads = [r.target for r in refusals if r.operation == "read" and r.target is not None]
    writes = [r.target for r in refusals if r.operation == "write" and r.target is not None]
    if not reads and not writes:
        return None
    return {
        "paths": list(dict.fromkeys(reads + writes))[:MAX_HINT_PATHS],
        "reads": reads[:MAX_HINT_PATHS],
        "writes": writes[:MAX_HINT_PATHS],
    }
