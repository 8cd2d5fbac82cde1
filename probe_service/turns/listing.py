"""``turn_list``: recent turns with every dispatch decision, for ``byte-probe turns``."""

from __future__ import annotations

from datetime import UTC, datetime

from ..store import Store
from .models import BlockedPlan, DispatchDecision, TurnSummary
from .rows import StoredTurn, load_decisions, load_turns, open_blocks, session_turn

__all__ = ["blocked_plans", "current_turn", "turn_list"]


def _summary(t: StoredTurn, decisions: tuple[DispatchDecision, ...] = ()) -> TurnSummary:
    return TurnSummary(
        turn_id=t.turn_id,
        root=t.root,
        scope=t.scope,
        snapshot_id=t.snapshot_id,
        began_at=t.began_at,
        claim_id=t.claim_id,
        stable=t.stable,
        decisions=decisions,
        actor=t.actor,
    )


def current_turn(
    store: Store, root: str, session: str, now: datetime | None = None
) -> TurnSummary | None:
    """The newest unexpired turn client ``session`` began under ``root``, if any."""
    with store.reading() as conn:
        found = session_turn(conn, root, session, now or datetime.now(UTC))
    return None if found is None else _summary(found)


def turn_list(store: Store, limit: int = 50) -> list[TurnSummary]:
    """The newest ``limit`` turns (newest first), each with its decisions (oldest first)."""
    with store.reading() as conn:
        found = load_turns(conn, limit)
        decisions = load_decisions(conn, [t.turn_id for t in found])
    return [_summary(t, tuple(decisions.get(t.turn_id, ()))) for t in found]


def blocked_plans(store: Store, root: str, scope: str, limit: int = 20) -> list[BlockedPlan]:
    """Blocks standing under ``root`` and ``scope`` (oldest first, at most ``limit``)."""
    with store.reading() as conn:
        return open_blocks(conn, root, scope, limit)
