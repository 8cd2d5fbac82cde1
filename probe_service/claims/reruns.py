"""Which evidence of a claim the service can run again, and the plans that rerun it.

docs/ARCHITECTURE.md, "Recheck": a rerun is the evidence's own plan with only
``snapshot_id`` changed to the target, under the same policy id: for a receipt, the plan
its commitment names (``committed.plan``); for a plan the claim declares, that plan. A
receipt is rerun only when its outcome carried the claim's outcome (an inconclusive
receipt beside a supporting one never supported the claim, and rerunning it would only
keep the obligation open). A claim with nothing to rerun needs a person or an agent: the
report says what it rests on instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..errors import ProbeServiceError
from ..plans.models import Plan, parse_plan, plan_id_of
from ..plans.persist import load_plan, load_receipt
from ..plans.receipts import verify_stored_receipt
from ..store import Store
from .movement import describe_query
from .receipts import AGREES
from .records import ClaimRecord, EvidenceRecord, ExactBlobBaseline

__all__ = ["ClaimReruns", "Rerun", "claim_reruns", "may_rerun", "rests_on"]

#: Characters of a text evidence shown in what a claim rests on.
_TEXT_SHOWN = 80


@dataclass(frozen=True)
class Rerun:
    """One rerun: the evidence it repeats, and its plan moved to the target snapshot."""

    evidence_kind: Literal["receipt", "plan"]
    evidence: str
    plan: Plan
    policy_id: str


@dataclass(frozen=True)
class ClaimReruns:
    """A claim's reruns on a target, the evidence left out (with why), what it rests on."""

    reruns: tuple[Rerun, ...]
    skipped: tuple[str, ...]
    rests_on: tuple[str, ...]


def may_rerun(claim: ClaimRecord) -> bool:
    """Whether the claim has evidence a recheck would rerun, judged from the claim alone
    (the gate's hint; ``claim_reruns`` reads the receipts themselves)."""
    return any(_carries(ev, claim) or ev.kind == "plan" for ev in claim.evidence)


def _carries(evidence: EvidenceRecord, claim: ClaimRecord) -> bool:
    return (
        evidence.kind == "receipt"
        and evidence.receipt is not None
        and AGREES.get(evidence.receipt_outcome or "") == claim.outcome
    )


def claim_reruns(store: Store, claim: ClaimRecord, target: str) -> ClaimReruns:
    """The reruns of ``claim``'s evidence on snapshot ``target`` (each receipt verified
    against its commitment, each declared plan against its id)."""
    reruns: list[Rerun] = []
    skipped: list[str] = []
    seen: set[tuple[str, str]] = set()
    for ev in claim.evidence:
        if ev.kind == "receipt" and ev.receipt is not None:
            if not _carries(ev, claim):
                skipped.append(
                    f"receipt {ev.receipt}: {ev.receipt_outcome} never carried the claim's "
                    f"outcome ({claim.outcome}); not rerun"
                )
                continue
            found = _from_receipt(store, ev.receipt, target)
        elif ev.kind == "plan" and ev.plan is not None:
            found = _from_declared(store, ev.plan, target)
        else:
            continue
        if isinstance(found, str):
            skipped.append(found)
        elif (key := (plan_id_of(found.plan), found.policy_id)) not in seen:
            seen.add(key)
            reruns.append(found)
    return ClaimReruns(tuple(reruns), tuple(skipped), rests_on(claim))


def _from_receipt(store: Store, receipt: str, target: str) -> Rerun | str:
    """The receipt's plan moved to ``target``, or why it cannot be rerun."""
    try:
        body = load_receipt(store, receipt)
        verify_stored_receipt(store, body)
    except ProbeServiceError as exc:
        return f"receipt {receipt}: cannot be read back ({exc})"
    # The typed receipt requires both fields of every version it reads.
    committed = body.committed
    moved = _moved(dict(committed.plan), target, f"receipt {receipt}")
    if isinstance(moved, str):
        return moved
    return Rerun("receipt", receipt, moved, committed.policy_id)


def _from_declared(store: Store, plan_id: str, target: str) -> Rerun | str:
    """The declared plan moved to ``target``, or why it cannot be rerun."""
    try:
        plan = load_plan(store, plan_id).canonical()
    except ProbeServiceError as exc:
        return f"plan {plan_id}: cannot be read back ({exc})"
    moved = _moved(plan, target, f"plan {plan_id}")
    if isinstance(moved, str):
        return moved
    return Rerun("plan", plan_id, moved, moved.policy_id)


def _moved(plan: dict[str, Any], target: str, what: str) -> Plan | str:
    try:
        return parse_plan({**plan, "snapshot_id": target})
    except ProbeServiceError as exc:
        return f"{what}: its plan no longer parses ({exc})"


def rests_on(claim: ClaimRecord) -> tuple[str, ...]:
    """What the claim rests on, in words: its evidence, then its dependencies."""
    said: list[str] = []
    for ev in claim.evidence:
        if ev.kind == "span":
            said.append(f"span {ev.path} bytes {ev.start}-{ev.end} (sha256 {ev.sha256})")
        elif ev.kind == "text" and ev.text is not None:
            text = ev.text if len(ev.text) <= _TEXT_SHOWN else ev.text[:_TEXT_SHOWN] + "…"
            said.append(f"text: {text}")
        elif ev.kind == "receipt":
            said.append(f"receipt {ev.receipt} ({ev.receipt_outcome})")
        elif ev.kind == "plan":
            said.append(f"declared plan {ev.plan}")
    if claim.origin == "answer" and claim.question:
        said.insert(0, f"a model-authored answer to: {claim.question}")
    if not claim.evidence and claim.origin != "answer":
        said.append("no evidence")
    for dep in claim.dependencies:
        if isinstance(dep, ExactBlobBaseline):
            said.append(f"dependency exact_blob {dep.path}")
        else:
            said.append(f"dependency {dep.form} {describe_query(dep.query)}")
    return tuple(said)
