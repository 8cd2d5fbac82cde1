"""Rows of the agent's turn: brief, record, gate each dispatch, list the decisions
(docs/ARCHITECTURE.md, "The agent's turn").

The posture is read from the administrator's policy file for the turn's root and scope;
no request names one (an unknown field is refused like any other).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import Field

from ... import turns
from ...claims import SpanRef
from ...policies import Posture, turn_posture
from ...turns.boundary import SymbolRef
from ...turns.dispatch import PostureOf
from ..registry import AGENT, HOST, WEB, Request, operation
from ..session import ProbeService
from .common import Frozen, TurnId
from .snapshots import capture_tree, confined_root

__all__: list[str] = []

_SCOPE = r"^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}$"


def _capture(svc: ProbeService, owner: str | None) -> turns.Capture:
    def capture(root: str) -> str:
        # Confined again on every capture: the stored root is checked as a new request.
        path = confined_root(svc, root)
        # docs/ARCHITECTURE.md, "The agent's turn": another turn's lease holds the tree.
        turns.lease_check(str(path), owner, datetime.now(UTC))
        return capture_tree(svc, path, exact_root=True).snapshot_id

    return capture


def _posture(svc: ProbeService) -> PostureOf:
    def posture_of(root: str, scope: str) -> Posture:
        return turn_posture(svc.policy_file, root, scope)

    return posture_of


class TurnBeginRequest(Request):
    root: str = Field(
        min_length=1,
        max_length=4096,
        description="The working tree of the turn (read, never run); confined like "
        "snapshot_capture's root on the host and MCP faces.",
    )
    scope: str = Field(pattern=_SCOPE, description="The scope (project) of the turn's claims.")
    question: str | None = Field(
        None, max_length=4000, description="What the user asked, in words (finds claims)."
    )
    symbols: tuple[SymbolRef, ...] = Field(
        (),
        max_length=20,
        description="Symbols the turn is about (find claims; turn_end's default).",
    )
    session: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="The client's session key, so a hook finds this turn (turn_current).",
    )


@operation("turn_begin", long_running=True)
def turn_begin(svc: ProbeService, req: TurnBeginRequest) -> turns.TurnBegun:
    """Call first in a code-anchored turn: captures the working tree and returns a turn
    id, the snapshot and a bounded brief (related live claims with their applicability on
    this snapshot, open obligations of the scope, plans still blocked). Nothing is
    executed. Pass the turn id to dispatch_check before each tool call and to turn_end
    with the answer."""
    root = str(confined_root(svc, req.root))
    return turns.turn_begin(
        svc.store,
        root,
        req.scope,
        capture=_capture(svc, None),
        posture=turn_posture(svc.policy_file, root, req.scope),
        question=req.question,
        symbols=req.symbols,
        session=req.session,
        caller=svc.context,
    )


class TurnEndRequest(Request):
    turn: TurnId
    answer: str = Field(min_length=1, max_length=65_536, description="The answer you gave.")
    spans: tuple[SpanRef, ...] = Field(
        (), max_length=100, description="Byte spans of the turn's snapshot the answer cites."
    )
    symbols: tuple[SymbolRef, ...] | None = Field(
        None, max_length=20, description="Symbols the answer is about (default: turn_begin's)."
    )


@operation("turn_end", long_running=True)
def turn_end(svc: ProbeService, req: TurnEndRequest) -> turns.TurnEnded:
    """Call when you give your answer: records it (unresolved) against the turn's
    snapshot with a boundary the service computes (cited spans' files, each symbol's
    TypeScript compiler boundary and identifier query set, the configuration and
    lockfiles), then captures again. If the tree moved during the turn the answer is not
    grounded and clears no block; a stable answer clears the blocks earlier turns left.
    Refuses an unknown, expired or already ended turn."""
    return turns.turn_end(
        svc.store,
        req.turn,
        req.answer,
        req.spans,
        capture=_capture(svc, req.turn),
        symbols=req.symbols,
        caller=svc.context,
    )


class DispatchCheckRequest(Request):
    turn: TurnId
    tool: str = Field(min_length=1, max_length=200, description="The tool about to run.")
    arguments: dict[str, Any] = Field(
        default_factory=dict, description="The tool's arguments (kept only as a digest)."
    )
    root: str | None = Field(
        None,
        min_length=1,
        max_length=4096,
        description="The caller's working tree; refused when it is not the turn's root.",
    )
    lease: bool = Field(
        False,
        description="Take (or renew) an exclusive lease on the workspace first, held "
        "until lease_release, turn_end or its expiry; cooperating captures and other "
        "turns are refused meanwhile. A block verdict gives back a lease it took.",
    )
    lease_seconds: int = Field(
        int(turns.DEFAULT_LEASE.total_seconds()),
        ge=1,
        le=int(turns.MAX_LEASE.total_seconds()),
        description="How long the lease lasts without a heartbeat (lease_renew).",
    )


@operation("dispatch_check", long_running=True)
def dispatch_check(svc: ProbeService, req: DispatchCheckRequest) -> turns.DispatchDecision:
    """Call immediately before dispatching a tool from a claim- or compiler-grounded
    plan: rechecks the working tree against the claims the turn's plan rests on and
    answers allow, warn or block (the administrator's posture decides) with the reasons:
    the claim, what moved and the command that clears it. A block stands across turns
    until a later turn's stable answer (turn_end) clears it. Every decision is recorded.
    With lease, first takes an exclusive lease on the workspace so no cooperating capture
    or turn moves it before the tool runs (a writer that ignores leases still can).
    Refuses an unknown or expired turn, a root that is not the turn's and a workspace
    another turn leases (lease_held, naming the holder)."""
    root = None if req.root is None else str(confined_root(svc, req.root))
    return turns.dispatch_check(
        svc.store,
        req.turn,
        req.tool,
        req.arguments,
        capture=_capture(svc, req.turn),
        posture_of=_posture(svc),
        root=root,
        caller=svc.context,
        lease=timedelta(seconds=req.lease_seconds) if req.lease else None,
    )


class TurnCurrentRequest(Request):
    root: str = Field(min_length=1, max_length=4096, description="The client's working tree.")
    scope: str = Field(pattern=_SCOPE, description="The scope whose posture is answered.")
    session: str = Field(min_length=1, max_length=200, description="The client's session key.")


class TurnCurrent(Frozen):
    #: The newest unexpired turn of the session under the root; None when there is none.
    turn: turns.TurnSummary | None
    #: The administrator's posture for the root and scope (never the caller's).
    posture: Posture
    #: Plans blocked under the root and scope that no later stable answer cleared.
    blocked_plans: list[turns.BlockedPlan]


@operation("turn_current", faces=HOST)
def turn_current(svc: ProbeService, req: TurnCurrentRequest) -> TurnCurrent:
    """The newest unexpired turn a client session began under a root, and the posture the
    administrator set for that root and scope (what a hook answers when it fails), with
    the plans still blocked there. Read-only."""
    root = str(confined_root(svc, req.root))
    return TurnCurrent(
        turn=turns.current_turn(svc.store, root, req.session),
        posture=turn_posture(svc.policy_file, root, req.scope),
        blocked_plans=turns.blocked_plans(svc.store, root, req.scope),
    )


class TurnListRequest(Request):
    limit: int = Field(50, ge=1, le=1000, description="Most turns returned (newest first).")


class TurnList(Frozen):
    turns: list[turns.TurnSummary]


@operation("turn_list", faces=AGENT | WEB)
def turn_list(svc: ProbeService, req: TurnListRequest) -> TurnList:
    """The newest turns with their answers and every dispatch decision (tool, posture,
    verdict, reasons). Read-only."""
    return TurnList(turns=turns.turn_list(svc.store, req.limit))


class LeaseRenewRequest(Request):
    turn: TurnId
    lease_seconds: int = Field(
        int(turns.DEFAULT_LEASE.total_seconds()),
        ge=1,
        le=int(turns.MAX_LEASE.total_seconds()),
        description="How long the lease lasts from now.",
    )


@operation("lease_renew")
def lease_renew(svc: ProbeService, req: LeaseRenewRequest) -> turns.Lease:
    """The heartbeat of a workspace lease dispatch_check took with lease: extends it from
    now. Refuses a turn that holds no unexpired lease (not_found) and a workspace another
    turn leases (lease_held, naming the holder)."""
    holder = turns.current_holder(svc.context.face)
    length = timedelta(seconds=req.lease_seconds)
    return turns.renew_turn_lease(svc.store, req.turn, holder, length)


class LeaseReleaseRequest(Request):
    turn: TurnId


class LeaseReleased(Frozen):
    root: str
    #: False when the turn held no lease there (already released, or expired and gone).
    released: bool


@operation("lease_release")
def lease_release(svc: ProbeService, req: LeaseReleaseRequest) -> LeaseReleased:
    """Release the workspace lease a turn took with dispatch_check (turn_end releases it
    too). Releasing twice is harmless (released false). Refuses a workspace another turn
    leases (lease_held): only its own turn releases a lease."""
    root, released = turns.release_turn_lease(svc.store, req.turn)
    return LeaseReleased(root=root, released=released)
