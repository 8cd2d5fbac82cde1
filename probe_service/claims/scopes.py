"""Which claims a scope names, and the refusal of a scope that names none.

The gate and the operations that judge claims on a snapshot refuse to answer for nothing
(docs/ARCHITECTURE.md, "Claims: the gate"): a scope (or, without one, a store) that holds
no live claim is ``invalid_input`` naming it and listing the scopes that do hold one, so a
misspelled scope in a CI file fails instead of passing on zero claims forever. A caller
who means it passes ``allow_empty``.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, exists, func, select
from sqlalchemy.sql import Select

from ..errors import InvalidInput
from .tables import claim_supersessions, claim_tombstones, claims

__all__ = [
    "MAX_LISTED_SCOPES",
    "live_claim_ids",
    "require_claims_in_scope",
    "require_live_claims",
    "require_some_live_claim",
]

#: Scopes an empty-scope refusal lists by name (it says how many there are in all).
MAX_LISTED_SCOPES = 20


def _live() -> Select[Any]:
    return (
        select(claims.c.claim_id)
        .where(claims.c.claim_id.not_in(select(claim_supersessions.c.predecessor_id)))
        .where(claims.c.claim_id.not_in(select(claim_tombstones.c.claim_id)))
    )


def live_claim_ids(conn: Connection, scope: str | None) -> list[str]:
    """Ids of the claims neither superseded nor withdrawn (in ``scope``), in id order."""
    live = _live()
    if scope is not None:
        live = live.where(claims.c.scope == scope)
    return [row[0] for row in conn.execute(live.order_by(claims.c.claim_id))]


def require_live_claims(conn: Connection, scope: str | None, *, allow_empty: bool) -> list[str]:
    """The live claim ids of ``scope`` (the whole store when None).

    Raises InvalidInput naming the scope and listing those with live claims when there is
    none, unless ``allow_empty``.
    """
    ids = live_claim_ids(conn, scope)
    if not ids and not allow_empty:
        raise _empty(conn, scope)
    return ids


def require_some_live_claim(conn: Connection, scope: str | None, *, allow_empty: bool) -> None:
    """``require_live_claims`` for a caller that needs no ids: one EXISTS, not every id.

    Raises InvalidInput as ``require_live_claims`` does.
    """
    if allow_empty:
        return
    live = _live()
    if scope is not None:
        live = live.where(claims.c.scope == scope)
    if not conn.execute(select(live.exists())).scalar():
        raise _empty(conn, scope)


def require_claims_in_scope(conn: Connection, scope: str | None) -> None:
    """Refuse a ``scope`` that no claim at all (live or retired) belongs to, the same way:
    an operation naming its claims by id may check a withdrawn one, but not in a scope that
    does not exist. Raises InvalidInput."""
    if scope is None:
        return
    if not conn.execute(select(exists().where(claims.c.scope == scope))).scalar():
        raise _empty(conn, scope)


def _empty(conn: Connection, scope: str | None) -> InvalidInput:
    scopes = _live().with_only_columns(claims.c.scope).distinct().subquery()
    total = int(conn.execute(select(func.count()).select_from(scopes)).scalar_one())
    named = [
        row[0]
        for row in conn.execute(
            select(scopes.c.scope).order_by(scopes.c.scope).limit(MAX_LISTED_SCOPES)
        )
    ]
    allow = "pass allow_empty (--allow-empty) to accept it"
    if scope is None:
        return InvalidInput(f"scope: the store holds no live claim, so nothing is judged; {allow}")
    if not named:
        listed = "no scope holds a live claim"
    else:
        more = ", …" if total > len(named) else ""
        count = f"{total} scope{'s' if total != 1 else ''} in all"
        listed = f"scopes with live claims: {', '.join(named)}{more} ({count})"
    return InvalidInput(f"scope: no live claim in scope {scope!r}; {listed}; {allow}")
