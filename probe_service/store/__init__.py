"""The store: schema, migrations, path safety, transactions and events."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .dialect import insert_on_conflict
    from .events import MAX_EVENTS_PAGE, Event, append_event, append_events, read_events, utc_now
    from .safety import DB_FILENAME, STATE_DIRNAME
    from .store import DATABASE_URL_ENV, Store, open_store

__all__ = [
    "DATABASE_URL_ENV",
    "DB_FILENAME",
    "MAX_EVENTS_PAGE",
    "STATE_DIRNAME",
    "Event",
    "Store",
    "append_event",
    "append_events",
    "insert_on_conflict",
    "open_store",
    "read_events",
    "utc_now",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__)
