"""What the turn operations answer (docs/ARCHITECTURE.md, "The agent's turn")."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from ..claims.records import ClaimCheck, KnowledgeHit, Obligation
from ..policies.postures import Posture
from .lease import Lease

__all__ = [
    "BlockedPlan",
    "DispatchDecision",
    "DispatchReason",
    "TurnBegun",
    "TurnEnded",
    "TurnSummary",
    "Verdict",
]

#: ``allow``: nothing the plan rests on moved (or the posture only reports);
#: ``warn``: it moved, and the posture allows the call with a message;
#: ``block``: it moved, and the posture refuses the call.
Verdict = Literal["allow", "warn", "block"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class BlockedPlan(_Frozen):
    """A stale plan under the turn's root and scope that no later stable answer cleared."""

    block_id: str
    turn_id: str
    claim_id: str
    snapshot_id: str
    reasons: tuple[str, ...]
    opened_at: str


class TurnBegun(_Frozen):
    """``turn_begin``: the turn, its snapshot and its bounded brief."""

    turn_id: str
    root: str
    scope: str
    snapshot_id: str
    expires_at: str
    posture: Posture
    #: Related live claims with their applicability on ``snapshot_id``.
    claims: tuple[KnowledgeHit, ...]
    open_obligations: tuple[Obligation, ...]
    blocked_plans: tuple[BlockedPlan, ...]
    #: Claims the turn's plan rests on: the related claims current on ``snapshot_id``.
    rests_on: tuple[str, ...]
    #: Entries left out of the brief by its bounds (claims, obligations, blocks).
    omitted: int
    #: The brief in words, for a model's context (hostile text is quoted, never obeyed).
    text: str


class TurnEnded(_Frozen):
    """``turn_end``: the recorded answer and the end-of-turn stability check."""

    turn_id: str
    claim_id: str
    snapshot_id: str
    end_snapshot_id: str
    #: The tree did not move between the turn's capture and the end-of-turn capture.
    stable: bool
    #: A stable answer on a current snapshot: it cleared the blocks listed.
    grounded: bool
    cleared_blocks: tuple[str, ...]
    #: What the service computed the boundary from, one line per dependency.
    boundary: tuple[str, ...]
    note: str
    #: Whether the turn's workspace lease was released with its end.
    lease_released: bool = False


class DispatchReason(_Frozen):
    """Why a dispatch is not simply allowed: a claim, what moved, the clearing command."""

    claim_id: str
    what_moved: tuple[str, ...]
    clear_with: str
    #: ``stale``: found now; ``blocked``: an earlier turn's block still stands.
    kind: Literal["stale", "blocked"]


class DispatchDecision(_Frozen):
    """``dispatch_check``: the verdict, recorded with the posture and reasons."""

    decision_id: str
    turn_id: str
    tool: str
    posture: Posture
    verdict: Verdict
    snapshot_id: str
    reasons: tuple[DispatchReason, ...]
    checks: tuple[ClaimCheck, ...]
    message: str
    decided_at: str
    #: The workspace lease this turn holds after the check (``lease`` asked, and the
    #: verdict not ``block``); None otherwise.
    lease: Lease | None = None


class TurnSummary(_Frozen):
    """One turn as ``byte-probe turns`` lists it, with its dispatch decisions."""

    turn_id: str
    root: str
    scope: str
    snapshot_id: str
    began_at: str
    claim_id: str | None
    stable: bool | None
    decisions: tuple[DispatchDecision, ...]
    #: Who began it, from the operating system (docs/ARCHITECTURE.md, "Principals and
    #: clearing"); None for a turn recorded before that.
    actor: str | None = None
