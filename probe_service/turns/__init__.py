"""Agent turns: a brief before, a recorded boundary after, a gate at every tool dispatch
(docs/ARCHITECTURE.md, "The agent's turn")."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .boundary import SymbolRef, answer_dependencies
    from .dispatch import dispatch_check
    from .lease import DEFAULT_LEASE, MAX_LEASE, Lease, LeaseHolder, current_holder, lease_check
    from .leasing import release_turn_lease, renew_turn_lease
    from .lifecycle import TURN_TTL, Capture, turn_begin, turn_end
    from .listing import blocked_plans, current_turn, turn_list
    from .models import BlockedPlan, DispatchDecision, TurnBegun, TurnEnded, TurnSummary

__all__ = [
    "DEFAULT_LEASE",
    "MAX_LEASE",
    "TURN_TTL",
    "BlockedPlan",
    "Capture",
    "DispatchDecision",
    "Lease",
    "LeaseHolder",
    "SymbolRef",
    "TurnBegun",
    "TurnEnded",
    "TurnSummary",
    "answer_dependencies",
    "blocked_plans",
    "current_holder",
    "current_turn",
    "dispatch_check",
    "lease_check",
    "release_turn_lease",
    "renew_turn_lease",
    "turn_begin",
    "turn_end",
    "turn_list",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__)
