"""What to do next about an open obligation, as the exact command to run.

The gate's report and a recheck's both end each obligation with its next step
(docs/ARCHITECTURE.md, "The gate report"): the ``recheck`` command when the claim has
evidence the service can run again, else what a person (or an agent) decides, and after a
recheck that disagreed, how to record the new outcome. Ids are written in full: a prefix
that is unique today may not be tomorrow. Every value is shell-quoted.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from .receipts import AGREES

__all__ = [
    "after_disagreement",
    "by_hand",
    "recheck_command",
]


def recheck_command(snapshot_id: str, scope: str | None, obligation_ids: Sequence[str] = ()) -> str:
    """``byte-probe recheck`` for ``obligation_ids`` (every open one in scope when none)."""
    argv = ["byte-probe", "recheck", "--snapshot", snapshot_id]
    if scope is not None:
        argv += ["--scope", scope]
    for obligation_id in obligation_ids:
        argv += ["--obligation", obligation_id]
    return shlex.join(argv)


def by_hand(obligation_id: str, claim_id: str) -> str:
    """The decision a person or an agent makes when nothing can be rerun."""
    resolve = shlex.join(["byte-probe", "obligations", "resolve", obligation_id])
    return (
        "nothing the service can rerun: read what the claim rests on, then record a claim "
        f"superseding {claim_id} (`{resolve} --resolution superseded --successor NEW_CLAIM "
        "--rationale …`), or accept the risk or withdraw it "
        f"(`{resolve} --resolution accepted_risk|withdrawn --rationale …`)"
    )


def after_disagreement(
    obligation_id: str,
    claim_id: str,
    claim_outcome: str,
    rerun: Mapping[str, Any],
    command: str,
) -> str:
    """The next step after a rerun (its ``receipt``, ``outcome``, ``reason`` and ``why``)
    that did not agree with the claim: record a new outcome as a new claim, or see why the
    rerun decided nothing and recheck again."""
    receipt, outcome = rerun.get("receipt"), rerun.get("outcome")
    if receipt is not None and outcome in ("supports", "refutes"):
        if AGREES[outcome] != claim_outcome:
            resolve = shlex.join(["byte-probe", "obligations", "resolve", obligation_id])
            return (
                f"receipt {receipt} {outcome} while the claim is {claim_outcome}: record the "
                f"new outcome as a claim superseding {claim_id} (`byte-probe claim create FILE` "
                f"with that receipt as evidence), then `{resolve} --resolution superseded "
                "--successor NEW_CLAIM --rationale …`"
            )
        return f"receipt {receipt} did not count ({rerun.get('why')}); then `{command}`"
    what = f"receipt {receipt} is inconclusive" if receipt else "the run left no receipt"
    reason = rerun.get("reason") or "no reason"
    return f"{what} ({reason}): fix what stopped it, then `{command}`"
