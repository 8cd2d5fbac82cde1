"""The events row: monotonic events after a cursor, or a named consumer's next page."""

from __future__ import annotations

from pydantic import Field

from ...store.events import Event
from .. import functions
from ..registry import Request, operation
from ..session import ProbeService
from .common import Frozen

__all__: list[str] = []


class KnowledgeEventsRequest(Request):
    after: int = Field(0, ge=0)
    limit: int = Field(1000, ge=1, le=10_000)
    consumer: str | None = Field(None, max_length=200)
    ack: int | None = Field(None, ge=0)


class Events(Frozen):
    events: list[Event]
    next_after: int


@operation("knowledge_events")
def knowledge_events(svc: ProbeService, req: KnowledgeEventsRequest) -> Events:
    """Consume monotonic events (snapshots, applicability, obligations, probes) after a
    cursor, or, for a named consumer, after the cursor it acknowledged."""
    found = functions.knowledge_events(
        svc.store, req.after, req.limit, consumer=req.consumer, ack=req.ack
    )
    last = found[-1].cursor if found else req.after
    return Events(events=found, next_after=last)
