"""The events row: monotonic events after a cursor, or a named consumer's next page."""

from __future__ import annotations

from pydantic import Field

from ...errors import InvalidInput
from ...store.consumers import acknowledge, consumer_cursor
from ...store.events import MAX_EVENTS_PAGE, Event, read_events
from ..registry import Request, operation
from ..session import ProbeService
from .common import Frozen

__all__: list[str] = []


class KnowledgeEventsRequest(Request):
    after: int = Field(0, ge=0, description="Events with a greater cursor (not with consumer).")
    limit: int = Field(1000, ge=1, le=10_000, description="Most events returned.")
    consumer: str | None = Field(
        None,
        max_length=200,
        description="A named consumer: resume after the cursor it acknowledged last.",
    )
    ack: int | None = Field(
        None, ge=0, description="With consumer: acknowledge this cursor first (next_after)."
    )


class Events(Frozen):
    events: list[Event]
    next_after: int


@operation("knowledge_events")
def knowledge_events(svc: ProbeService, req: KnowledgeEventsRequest) -> Events:
    """Consume monotonic events (snapshots, applicability, obligations, probes) after a
    cursor, or, for a named consumer, after the cursor it acknowledged."""
    found = _events(svc, req)
    last = found[-1].cursor if found else req.after
    return Events(events=found, next_after=last)


def _events(svc: ProbeService, req: KnowledgeEventsRequest) -> list[Event]:
    """Events with a cursor past ``after``, or, for a named consumer, past the cursor it
    acknowledged (``ack`` first acknowledges that cursor).

    Raises InvalidInput (bad consumer name, ``after`` or ``ack`` without a consumer),
    NotFound or Conflict for an acknowledgement past the newest event or behind the
    consumer's.
    """
    page = min(req.limit, MAX_EVENTS_PAGE)
    if req.consumer is None:
        if req.ack is not None:
            raise InvalidInput("ack: acknowledging needs a consumer name")
        with svc.store.reading() as conn:
            return read_events(conn, req.after, page)
    if req.after:
        raise InvalidInput("after: a consumer resumes at its acknowledged cursor; omit after")
    with svc.store.transaction() as conn:
        if req.ack is not None:
            acknowledge(conn, req.consumer, req.ack)
        return read_events(conn, consumer_cursor(conn, req.consumer), page)
