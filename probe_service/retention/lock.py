"""One gc at a time per store: a lock the operating system or the server releases when
its holder dies, and a row naming who took it (docs/ARCHITECTURE.md, "Retention and gc").

PostgreSQL: a session advisory lock on a connection held for the whole gc. SQLite: an
``flock`` on a file beside the database. Either ends with the process, so a gc killed
with SIGKILL never leaves a lock behind; the ``gc_lock`` row only names the last holder
for a refused second gc's message.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import text

from ..errors import GcLocked, OSFailure
from ..store import Store
from ..store.events import utc_now

__all__ = ["GC_LOCK_KEY", "gc_lock"]

#: Names the PostgreSQL advisory lock of gc (the event publishers' key + 2).
GC_LOCK_KEY = 0x6279_7467


def _holder_of(store: Store) -> str:
    with store.reading() as conn:
        row = conn.execute(text("SELECT holder, since FROM gc_lock WHERE id = 1")).first()
    return "unknown" if row is None else f"{row.holder} since {row.since}"


def _note_holder(store: Store, holder: str) -> None:
    with store.transaction() as conn:
        conn.execute(text("DELETE FROM gc_lock"))
        conn.execute(
            text("INSERT INTO gc_lock (id, holder, since) VALUES (1, :h, :s)"),
            {"h": holder, "s": utc_now()},
        )


@contextmanager
def gc_lock(store: Store, holder: str) -> Iterator[None]:
    """Hold the store's gc lock for the block.

    Raises GcLocked naming the holder when another gc holds it, OSFailure when SQLite's
    lock file cannot be opened.
    """
    if store.dialect_name == "postgresql":
        with store.engine.connect() as conn:
            got = conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": GC_LOCK_KEY})
            if not got.scalar():
                conn.rollback()
                raise GcLocked(f"gc: another gc holds this store's gc lock ({_holder_of(store)})")
            conn.commit()
            try:
                _note_holder(store, holder)
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": GC_LOCK_KEY})
                conn.commit()
        return
    path = f"{store.engine.url.database}-gc.lock"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise OSFailure(f"gc: cannot open the gc lock file {path} ({exc})") from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise GcLocked(
                f"gc: another gc holds this store's gc lock ({_holder_of(store)})"
            ) from None
        _note_holder(store, holder)
        yield
    finally:
        os.close(fd)
