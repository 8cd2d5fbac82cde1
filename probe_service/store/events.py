"""Durable events with a dense, increasing cursor, consumed with ``knowledge_events``.

docs/ARCHITECTURE.md, "Event cursor": a reader sees events in cursor order and never
passes one that commits later; writers take no lock to keep it so.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy import Connection, Table, func, insert, select, text

from ..errors import CursorExpired, LimitExceeded
from .schema import event_outbox, events, gc_tombstones

__all__ = [
    "MAX_EVENTS_PAGE",
    "Event",
    "append_event",
    "append_events",
    "event_floor",
    "newest_cursor",
    "publish_events",
    "read_events",
    "utc_now",
]

#: Largest page ``knowledge_events`` returns in one call.
MAX_EVENTS_PAGE = 10_000

#: Names the lock that orders *publishers* on PostgreSQL (readers that number committed
#: outbox rows); writers never take it. It is the key the event-writing commits of
#: releases before ``0012_event_outbox`` took, so such a writer still running during an
#: upgrade is ordered against the publishers too (docs/UPGRADING.md).
_PUBLISH_LOCK_KEY = 0x6279_7465

#: Largest number of outbox rows one publishing statement moves; a reader publishes again
#: while a full batch came back.
PUBLISH_BATCH = 10_000

#: Moves committed outbox rows into ``events``, numbered densely after the newest cursor in
#: the order they were written. One statement, so a publisher killed halfway moves nothing.
_PUBLISH = text(
    """
    WITH moved AS (
        DELETE FROM event_outbox
        WHERE id IN (SELECT id FROM event_outbox ORDER BY id LIMIT :batch)
        RETURNING id, kind, subject, payload, created_at
    ), top AS (SELECT coalesce(max(cursor), 0) AS cursor FROM events)
    INSERT INTO events (cursor, kind, subject, payload, created_at)
    SELECT top.cursor + row_number() OVER (ORDER BY moved.id),
           moved.kind, moved.subject, moved.payload, moved.created_at
    FROM moved, top
    RETURNING cursor
    """
)

#: Keeps the ``events`` serial ahead of the published cursors, for a writer of an older
#: release that still inserts into ``events`` itself during an upgrade.
_KEEP_SERIAL = text("SELECT setval(pg_get_serial_sequence('events', 'cursor'), :top)")


class Event(BaseModel):
    """One durable event; ``cursor`` is dense and increases in the order readers see them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    cursor: int
    kind: str
    subject: str
    payload: dict[str, Any]
    created_at: str


def utc_now() -> str:
    """Return the current UTC time as an ISO-8601 string with microseconds."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _event_table(conn: Connection) -> Table:
    """Where a writer inserts: PostgreSQL's outbox (no lock, numbered when published), or
    SQLite's ``events`` itself (its one writer at a time numbers them in commit order)."""
    return event_outbox if conn.dialect.name == "postgresql" else events


def append_event(conn: Connection, kind: str, subject: str, payload: dict[str, Any]) -> None:
    """Append an event inside the caller's transaction; it gets its cursor once a reader
    sees it committed (docs/ARCHITECTURE.md, "Event cursor")."""
    append_events(conn, [(kind, subject, payload)])


def append_events(conn: Connection, items: Sequence[tuple[str, str, dict[str, Any]]]) -> None:
    """Append ``(kind, subject, payload)`` events, in order, inside the caller's transaction:
    one statement for all of them (their cursors follow the order of ``items``)."""
    if not items:
        return
    now = utc_now()
    conn.execute(
        insert(_event_table(conn)),
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


def publish_events(conn: Connection) -> int:
    """Number every committed outbox row into ``events``; return how many moved.

    Only committed rows are visible to the publishing statement, and a transaction still
    open when it runs is numbered by a later publisher, after every cursor handed out
    before: so no reader ever passes an event that commits later, and a rolled-back
    writer leaves no hole. Publishers take one lock among themselves (writers never wait
    on it); its statement runs after the lock is held, so it sees every row an earlier
    publisher numbered. A no-op on SQLite.
    """
    if conn.dialect.name != "postgresql":
        return 0
    conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PUBLISH_LOCK_KEY})
    moved, top = 0, 0
    while True:
        cursors = conn.execute(_PUBLISH, {"batch": PUBLISH_BATCH}).scalars().all()
        moved += len(cursors)
        top = max([top, *cursors])
        if len(cursors) < PUBLISH_BATCH:
            break
    if moved:
        conn.execute(_KEEP_SERIAL, {"top": top})
    return moved


def newest_cursor(conn: Connection) -> int:
    """The newest cursor a reader can see (0 when there is none), publishing first."""
    publish_events(conn)
    return int(conn.execute(select(func.max(events.c.cursor))).scalar() or 0)


def event_floor(conn: Connection) -> int:
    """The highest cursor ``gc`` removed (0 when it removed none): every event at or
    below it is gone (docs/ARCHITECTURE.md, "Retention and gc")."""
    found = conn.execute(
        select(func.max(gc_tombstones.c.floor)).where(gc_tombstones.c.kind == "events")
    ).scalar()
    return int(found or 0)


def read_events(conn: Connection, after: int, limit: int) -> list[Event]:
    """Return up to ``limit`` events with a cursor greater than ``after``, oldest first.

    Raises LimitExceeded when ``limit`` is not between 1 and MAX_EVENTS_PAGE,
    CursorExpired when gc removed events after ``after``: a reader is told, never
    skipped forward past events it did not see.
    """
    if not 1 <= limit <= MAX_EVENTS_PAGE:
        raise LimitExceeded(f"limit: {limit} is outside 1..{MAX_EVENTS_PAGE}")
    floor = event_floor(conn)
    if after < floor:
        raise CursorExpired(
            f"after: cursor {after} is below the event floor {floor} (gc removed events "
            f"up to {floor}); resume after {floor}, knowing the events between are gone"
        )
    publish_events(conn)
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
