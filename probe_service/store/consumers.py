"""Durable named consumers of the event log: each keeps the cursor it last acknowledged.

``events --consumer NAME`` resumes after that cursor, so a consumer that crashes between
reading and acknowledging reads the same events again (at-least-once), and one that
acknowledged never sees them twice. Acknowledgements only move forward.
"""

from __future__ import annotations

import re

from sqlalchemy import Connection, select

from ..errors import Conflict, InvalidInput, NotFound
from .dialect import insert_on_conflict
from .events import newest_cursor, utc_now
from .schema import event_consumers

__all__ = ["acknowledge", "check_consumer", "consumer_cursor"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")


def check_consumer(name: str) -> str:
    """Return ``name`` if it is a valid consumer name; raise InvalidInput otherwise."""
    if not _NAME.match(name):
        raise InvalidInput(f"consumer: {name!r} is not 1-128 of [A-Za-z0-9._:@-]")
    return name


def consumer_cursor(conn: Connection, name: str) -> int:
    """The cursor ``name`` last acknowledged (0 for a consumer never seen)."""
    found = conn.execute(
        select(event_consumers.c.cursor).where(event_consumers.c.consumer == check_consumer(name))
    ).scalar()
    return int(found or 0)


def acknowledge(conn: Connection, name: str, cursor: int) -> int:
    """Record that ``name`` processed every event up to ``cursor``; return it.

    Raises InvalidInput (bad name), NotFound (no event has that cursor yet), Conflict (the
    consumer already acknowledged a later cursor).
    """
    previous = consumer_cursor(conn, name)
    if cursor < previous:
        raise Conflict(f"ack: consumer {name!r} already acknowledged {previous}; not {cursor}")
    newest = newest_cursor(conn)
    if cursor > newest:
        raise NotFound(f"ack: no event has cursor {cursor} yet (newest is {newest})")
    now = utc_now()
    stmt = insert_on_conflict(conn, event_consumers).values(
        consumer=name, cursor=cursor, acknowledged_at=now
    )
    conn.execute(
        stmt.on_conflict_do_update(
            index_elements=["consumer"], set_={"cursor": cursor, "acknowledged_at": now}
        )
    )
    return cursor
