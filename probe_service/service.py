"""The operations every interface shares; CLI, NDJSON host, MCP and queue call only these.

Each function takes the store (and whatever else it needs) explicitly and returns plain
pydantic models, so an adapter never needs to know how an answer was produced.
"""

from __future__ import annotations

from pathlib import Path

from .snapshot import CaptureResult, Snapshot, load_snapshot, snapshot_capture
from .snapshot import snapshot_materialize as _materialize
from .store import MAX_EVENTS_PAGE, Event, Store, read_events

__all__ = [
    "knowledge_events",
    "snapshot_capture",
    "snapshot_get",
    "snapshot_materialize",
]


def snapshot_get(store: Store, snapshot_id: str) -> Snapshot:
    """Return a stored snapshot; raises NotFound when it is not stored."""
    return load_snapshot(store, snapshot_id)


def snapshot_materialize(store: Store, snapshot_id: str, dest: Path) -> Snapshot:
    """Rebuild a snapshot into ``dest``; raises NotFound or UnsafePath."""
    return _materialize(store, snapshot_id, dest)


def knowledge_events(store: Store, after: int = 0, limit: int = 1000) -> list[Event]:
    """Return events with a cursor greater than ``after``; raises LimitExceeded on a bad limit."""
    with store.reading() as conn:
        return read_events(conn, after, min(limit, MAX_EVENTS_PAGE) if limit > 0 else limit)


# Re-exported so callers find every operation here.
_ = (CaptureResult, snapshot_capture)
