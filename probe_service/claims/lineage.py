"""Supersession chains and withdrawal tombstones."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, insert, select

from ..errors import Conflict, InvalidClaim
from ..policies.clearing import ClearingRule
from ..principals import current_actor
from ..store import Store, append_event, utc_now
from .audit import append_audit
from .callers import PYTHON_CALLER, Caller
from .creation import link_supersession
from .digests import digest_json
from .records import Tombstone
from .resolutions import list_in, resolve_in
from .reviews import authorize_direct
from .rows import load_claim
from .tables import claim_supersessions, claim_tombstones

__all__ = ["claim_withdraw", "record_supersession", "supersession_chain", "withdraw_in"]

#: Longest chain walked; a longer one means a cycle or a runaway writer.
MAX_CHAIN = 10_000


def claim_withdraw(
    store: Store,
    claim_id: str,
    rationale: str,
    *,
    scope: str | None = None,
    caller: Caller = PYTHON_CALLER,
    clearing: Sequence[ClearingRule] = (),
) -> Tombstone:
    """Withdraw a claim, leaving a tombstone for its statement and boundary; its open
    obligations are resolved as ``withdrawn`` with the same rationale.

    Raises NotFound (no such claim in scope), Conflict (already withdrawn),
    InvalidClaim (empty rationale), NotPermitted (the ``clearing`` rule of its scope).
    """
    with store.transaction() as conn:
        claim = load_claim(conn, claim_id, scope)
        authorize_direct(clearing, current_actor(), claim.scope, "withdrawn", "claim_withdraw")
        return withdraw_in(conn, claim_id, rationale, scope=scope, interface=caller.face)


def withdraw_in(
    conn: Connection, claim_id: str, rationale: str, *, scope: str | None, interface: str
) -> Tombstone:
    """``claim_withdraw`` inside the caller's transaction."""
    if not rationale.strip():
        raise InvalidClaim("rationale: required")
    claim = load_claim(conn, claim_id, scope)
    if claim.withdrawn:
        raise Conflict(f"claim {claim_id} is already withdrawn")
    tomb = Tombstone(
        claim_id=claim_id,
        scope=claim.scope,
        boundary_key=claim.boundary_key,
        rationale=rationale,
        withdrawn_at=utc_now(),
    )
    conn.execute(insert(claim_tombstones).values(**tomb.model_dump()))
    append_audit(
        conn,
        operation="claim_withdraw",
        interface=interface,
        scope=claim.scope,
        subject_ids=[claim_id],
        before=claim.record_digest,
        after=digest_json(tomb.model_dump()),
    )
    append_event(conn, "claim_withdrawn", claim_id, {"scope": claim.scope})
    # A withdrawn claim asks nothing more of anyone: its open obligations close with it.
    still_open = list_in(conn, claim_id=claim_id, state="open")
    resolve_in(conn, still_open, "withdrawn", rationale, interface=interface)
    return tomb


def record_supersession(
    conn: Connection,
    predecessor_id: str,
    successor_id: str,
    scope: str,
    rationale: str,
    *,
    interface: str,
) -> None:
    """Link two existing claims of ``scope``; raise NotFound or Conflict when it cannot hold."""
    link_supersession(conn, predecessor_id, successor_id, scope, rationale)
    chain = _chain(conn, successor_id)
    if predecessor_id in chain:
        raise Conflict(f"claim {successor_id} already descends from {predecessor_id}")
    conn.execute(
        insert(claim_supersessions).values(
            predecessor_id=predecessor_id,
            successor_id=successor_id,
            scope=scope,
            rationale=rationale,
            created_at=utc_now(),
        )
    )
    append_audit(
        conn,
        operation="claim_supersede",
        interface=interface,
        scope=scope,
        subject_ids=[predecessor_id, successor_id],
        before=None,
        after=digest_json([predecessor_id, successor_id, rationale]),
    )
    append_event(
        conn, "claim_superseded", predecessor_id, {"scope": scope, "successor_id": successor_id}
    )


def supersession_chain(store: Store, claim_id: str, *, scope: str | None = None) -> list[str]:
    """The chain through ``claim_id``, oldest first; raise NotFound when it is not in scope."""
    with store.reading() as conn:
        load_claim(conn, claim_id, scope)
        return _chain(conn, claim_id)


def _chain(conn: Connection, claim_id: str) -> list[str]:
    sup = claim_supersessions.c
    older = _walk(conn, claim_id, sup.successor_id, sup.predecessor_id)
    newer = _walk(conn, claim_id, sup.predecessor_id, sup.successor_id)
    return [*reversed(older), claim_id, *newer]


def _walk(conn: Connection, start: str, by: Any, to: Any) -> list[str]:
    """Follow supersession links from ``start`` (``by`` -> ``to``), at most MAX_CHAIN steps."""
    found: list[str] = []
    current = start
    for _ in range(MAX_CHAIN):
        row = conn.execute(select(to).where(by == current)).first()
        if row is None:
            break
        current = row[0]
        found.append(current)
    return found
