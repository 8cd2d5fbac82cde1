"""A turn's workspace lease through the table: renew it (the heartbeat) and release it
(docs/ARCHITECTURE.md, "The agent's turn": the workspace lease). ``dispatch_check`` takes
it; ``turn_end`` releases it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ..store import Store
from .lease import DEFAULT_LEASE, Lease, LeaseHolder, lease_release, lease_renew
from .rows import load_turn

__all__ = ["release_turn_lease", "renew_turn_lease"]


def renew_turn_lease(
    store: Store,
    turn_id: str,
    holder: LeaseHolder,
    length: timedelta = DEFAULT_LEASE,
    now: datetime | None = None,
) -> Lease:
    """Extend the lease turn ``turn_id`` holds on its root.

    Raises NotFound (unknown turn, or no unexpired lease of it), Conflict (expired turn),
    LeaseHeld (another turn leases the root).
    """
    now = now or datetime.now(UTC)
    with store.reading() as conn:
        turn = load_turn(conn, turn_id, now)
    return lease_renew(turn.root, turn_id, holder, now, length)


def release_turn_lease(store: Store, turn_id: str, now: datetime | None = None) -> tuple[str, bool]:
    """Release the lease turn ``turn_id`` holds on its root: (the root, whether there was
    one).

    Raises NotFound (unknown turn), Conflict (expired turn), LeaseHeld (another turn's
    lease holds: only its turn releases it).
    """
    now = now or datetime.now(UTC)
    with store.reading() as conn:
        turn = load_turn(conn, turn_id, now)
    return turn.root, lease_release(turn.root, turn_id, now)
