"""Durable events with a strictly increasing cursor, consumed with ``knowledge_events``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy import Connection, insert, select, text

from ..errors import LimitExceeded
from .schema import events

__all__ = ["MAX_EVENTS_PAGE", "Event", "append_event", "append_events", "read_events", "utc_now"]

#: Largest page ``knowledge_events`` returns in one call.
MAX_EVENTS_PAGE = 10_000

#: Any constant works; it names the lock that orders event commits on PostgreSQL.
_EVENT_LOCK_KEY = 0x6279_7465


class Event(BaseModel):
    """One durable event; ``cursor`` increases strictly in commit order."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    cursor: int
    kind: str
    subject: str
    payload: dict[str, Any]
    created_at: str


def utc_now() -> str:
    """Return the current UTC time as an ISO-8601 string with microseconds."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _order_commits(conn: Connection) -> None:
    if conn.dialect.name == "postgresql":
        # A sequence hands out numbers before commit, so a reader could see cursor 5
        # before 4 commits and skip 4 forever; one transaction-scoped lock orders commits.
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _EVENT_LOCK_KEY})


def append_event(conn: Connection, kind: str, subject: str, payload: dict[str, Any]) -> int:
    """Append an event inside the caller's transaction and return its cursor."""
    _order_commits(conn)
    result = conn.execute(
        insert(events).values(
            kind=kind,
            subject=subject,
            payload=json.dumps(payload, sort_keys=True),
            created_at=utc_now(),
        )
    )
    pk = result.inserted_primary_key
    assert pk is not None  # noqa: S101 - an insert into a table with a primary key
    return int(pk[0])


def append_events(conn: Connection, items: Sequence[tuple[str, str, dict[str, Any]]]) -> None:
    """Append ``(kind, subject, payload)`` events, in order, inside the caller's transaction:
    one statement for all of them (the cursors follow the order of ``items``)."""
    if not items:
        return
    _order_commits(conn)
    now = utc_now()
    conn.execute(
        insert(events),
        [
            {
                "kind": kind,
                "subject": subject,
                "payload": json.dumps(payload, sort_keys=True),
                "created_at": now,
            }
            for kind, subject, payload in items
        ],
    )


def read_events(conn: Connection, after: int, limit: int) -> list[Event]:
    """Return up to ``limit`` events with a cursor greater than ``after``, oldest first.

    Raises LimitExceeded when ``limit`` is not between 1 and MAX_EVENTS_PAGE.
    """
    if not 1 <= limit <= MAX_EVENTS_PAGE:
        raise LimitExceeded(f"limit: {limit} is outside 1..{MAX_EVENTS_PAGE}")
    rows = conn.execute(
        select(events).where(events.c.cursor > after).order_by(events.c.cursor).limit(limit)
    )
    return [
        Event(
            cursor=row.cursor,
            kind=row.kind,
            subject=row.subject,
            payload=json.loads(row.payload),
            created_at=row.created_at,
        )
        for row in rows
    ]
