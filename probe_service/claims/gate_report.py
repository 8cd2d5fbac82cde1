"""The gate's report: one model, rendered as JSON, text and Markdown.

docs/ARCHITECTURE.md, "The gate report": per open obligation on the gated snapshot, the
claim's statement and scope, its outcome, what moved (``movement``) and the next step
(``next_steps``: the exact ``recheck`` command, or what a person decides), plus the live
claims whose outcome is ``refuted`` (a warning, unless the caller fails on them). Other
features add their fields here, beside these; the renderers (``gate_render``) show every
field the model has.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy import Connection, select

from .movement import Moved, describe_movement
from .next_steps import after_disagreement, by_hand, recheck_command
from .records import Applicability, Baseline, ClaimCheck, ClaimRecord, Obligation
from .reruns import may_rerun, rests_on
from .rows import chunks
from .sources import SnapshotSource
from .tables import recheck_items, recheck_settlements, rechecks
from .views import TreeView

__all__ = [
    "MAX_MOVED_ENTRIES",
    "GateDependency",
    "GateEntry",
    "GateReport",
    "RecheckHint",
    "RefutedClaim",
    "gate_entries",
    "refuted_claims",
]

#: Open obligations whose "what moved" one gate computes (each may evaluate a query on
#: the claim's snapshot); the others list their dependencies' reasons only.
MAX_MOVED_ENTRIES = 100


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class GateDependency(_Frozen):
    """One dependency of a claim that is not current on the gated snapshot."""

    position: int
    form: str
    state: Applicability
    reason: str
    #: What moved (None when it was not computed: see ``GateReport.moved_omitted``).
    moved: Moved | None = None


class RecheckHint(_Frozen):
    """How an open obligation can be closed."""

    #: Whether the claim has evidence a recheck reruns (a receipt that carried its
    #: outcome, or a declared plan).
    rerunnable: bool
    #: The exact command rechecking this obligation (None when nothing can be rerun).
    command: str | None
    #: For a claim with nothing to rerun: the evidence and dependencies it rests on.
    rests_on: tuple[str, ...] = ()
    #: The batch of an earlier recheck of it whose runs have not all finished.
    under_way: str | None = None
    #: What the last settled recheck of it found, when a rerun disagreed.
    disagreed: str | None = None
    #: The next step in words, with its command.
    next: str


class GateEntry(_Frozen):
    """One open obligation on the gated snapshot, with what to do about it."""

    obligation_id: str
    claim_id: str
    scope: str
    statement: str
    kind: str
    #: The claim's recorded outcome (never edited by a check).
    outcome: str
    applicability: Applicability
    #: The reasons the obligation was opened with.
    reasons: tuple[str, ...]
    #: The claim's dependencies that are not current on the gated snapshot.
    dependencies: tuple[GateDependency, ...]
    recheck: RecheckHint


class RefutedClaim(_Frozen):
    """A live claim in scope whose recorded outcome is ``refuted``."""

    claim_id: str
    scope: str
    statement: str
    applicability: Applicability
    receipts: tuple[str, ...]


class GateReport(_Frozen):
    """Outcome of ``gate``: passes only while no obligation in scope is open (nor, with
    ``fail_on_refuted``, any live claim refuted)."""

    snapshot_id: str
    scope: str | None
    checked: int
    opened: tuple[Obligation, ...]
    open_obligations: tuple[Obligation, ...]
    passed: bool
    #: Obligations on this snapshot resolved as accepted risk: listed, never counted checked.
    accepted_risk: tuple[Obligation, ...] = ()
    #: Obligations on this snapshot a check closed because the claim is current again.
    current_again: tuple[Obligation, ...] = ()
    #: True when no scope was given and the whole store was gated.
    whole_store: bool = False
    #: With ``require_signed``: each receipt evidence the gate refused, naming claim,
    #: receipt and why (unsigned, another key, revoked, bad signature); any fails the gate.
    unsigned_evidence: tuple[str, ...] = ()
    #: One entry per open obligation, in the order of ``open_obligations``.
    entries: tuple[GateEntry, ...] = ()
    #: Live claims in scope whose outcome is refuted: a warning, or a failure with
    #: ``fail_on_refuted``.
    refuted: tuple[RefutedClaim, ...] = ()
    fail_on_refuted: bool = False
    #: The command rechecking every open obligation of the scope on this snapshot.
    recheck_command: str | None = None
    #: Entries beyond MAX_MOVED_ENTRIES, whose "what moved" was not computed.
    moved_omitted: int = 0


def gate_entries(
    conn: Connection,
    still_open: Sequence[Obligation],
    claims: Mapping[str, ClaimRecord],
    checks: Mapping[str, ClaimCheck],
    target: TreeView | None,
    source: SnapshotSource,
) -> tuple[list[GateEntry], int]:
    """An entry per open obligation (its claim loaded in ``claims``), and how many got no
    "what moved" (beyond MAX_MOVED_ENTRIES)."""
    last = _last_rechecks(conn, [o.obligation_id for o in still_open])
    entries: list[GateEntry] = []
    omitted = 0
    for i, obligation in enumerate(still_open):
        claim = claims[obligation.claim_id]
        check = checks.get(obligation.claim_id)
        detailed = i < MAX_MOVED_ENTRIES and target is not None
        omitted += int(not detailed and check is not None)
        deps = _dependencies(claim, check, target if detailed else None, source)
        entries.append(
            GateEntry(
                obligation_id=obligation.obligation_id,
                claim_id=claim.claim_id,
                scope=obligation.scope,
                statement=claim.statement,
                kind=claim.kind,
                outcome=claim.outcome,
                applicability=obligation.applicability,
                reasons=obligation.reasons,
                dependencies=deps,
                recheck=_hint(obligation, claim, last.get(obligation.obligation_id)),
            )
        )
    return entries, omitted


def _dependencies(
    claim: ClaimRecord,
    check: ClaimCheck | None,
    target: TreeView | None,
    source: SnapshotSource,
) -> tuple[GateDependency, ...]:
    if check is None:
        return ()
    baselines: Sequence[Baseline] = claim.dependencies
    before = source.tree(claim.snapshot_id) if target is not None else None
    found = []
    for dep in check.dependencies:
        if dep.state == "current":
            continue
        moved = None
        if target is not None and dep.position < len(baselines):
            moved = describe_movement(baselines[dep.position], dep, before, target)
        found.append(
            GateDependency(
                position=dep.position,
                form=dep.form,
                state=dep.state,
                reason=dep.reason,
                moved=moved,
            )
        )
    return tuple(found)


def _hint(obligation: Obligation, claim: ClaimRecord, last: dict[str, Any] | None) -> RecheckHint:
    oid = obligation.obligation_id
    if not may_rerun(claim):
        return RecheckHint(
            rerunnable=False,
            command=None,
            rests_on=rests_on(claim),
            next=by_hand(oid, claim.claim_id),
        )
    command = recheck_command(obligation.snapshot_id, obligation.scope, [oid])
    if last is not None and last["settled"] is None:
        batch = last["batch_id"]
        return RecheckHint(
            rerunnable=True,
            command=command,
            under_way=batch,
            next=f"wait: a recheck runs it (batch {batch}); `{command}` waits for it",
        )
    if last is not None and last["disagreed"] is not None:
        run = last["disagreed"]
        found = run.get("why") or "a rerun did not agree"
        next_step = after_disagreement(oid, claim.claim_id, claim.outcome, run, command)
        return RecheckHint(rerunnable=True, command=command, disagreed=found, next=next_step)
    return RecheckHint(rerunnable=True, command=command, next=f"`{command}`")


def _last_rechecks(conn: Connection, obligation_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per obligation, its latest recheck: batch, settlement (None while running) and the
    first rerun that disagreed, if that settlement left it open."""
    ri, rc, rs = recheck_items.c, rechecks.c, recheck_settlements.c
    found: dict[str, dict[str, Any]] = {}
    for part in chunks(list(obligation_ids)):
        rows = conn.execute(
            select(ri.obligation_id, ri.batch_id, rc.requested_at, rs.verdicts)
            .join(rechecks, rc.batch_id == ri.batch_id)
            .join(recheck_settlements, rs.batch_id == ri.batch_id, isouter=True)
            .where(ri.obligation_id.in_(part))
            .order_by(rc.requested_at, ri.batch_id)
        )
        for row in rows:
            found[row.obligation_id] = _last(row.obligation_id, row.batch_id, row.verdicts)
    return found


def _last(obligation_id: str, batch_id: str, verdicts: str | None) -> dict[str, Any]:
    if verdicts is None:
        return {"batch_id": batch_id, "settled": None, "disagreed": None}
    verdict = json.loads(verdicts)["obligations"].get(obligation_id, {})
    bad = next((r for r in verdict.get("runs", {}).values() if not r["agrees"]), None)
    return {"batch_id": batch_id, "settled": True, "disagreed": bad}


def refuted_claims(
    claims: Mapping[str, ClaimRecord], checks: Sequence[ClaimCheck]
) -> list[RefutedClaim]:
    """The checked live claims whose outcome is refuted, with their receipts."""
    found = []
    for check in checks:
        if check.outcome != "refuted":
            continue
        claim = claims[check.claim_id]
        found.append(
            RefutedClaim(
                claim_id=claim.claim_id,
                scope=claim.scope,
                statement=claim.statement,
                applicability=check.state,
                receipts=tuple(ev.receipt for ev in claim.evidence if ev.receipt is not None),
            )
        )
    return found
