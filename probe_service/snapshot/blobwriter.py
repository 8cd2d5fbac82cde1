"""Bulk blob writes for a capture: one connection, batches in their own transactions.

On SQLite the write path is the bottleneck of a cold capture: appending a batch to the
WAL and copying it into the database file (the checkpoint, run by the committing
connection every ~32 MiB) take about equal time, one after the other. Here the writer
connection does not checkpoint; a second connection checkpoints (PASSIVE: never blocks
the writer or a reader, never loses a committed frame) on its own thread after each
commit, and the writer runs a last checkpoint when the load ends. ``synchronous`` stays
NORMAL: a checkpoint still syncs the WAL before and the database file after copying.
On SQLite a batch goes to the driver's ``executemany`` as plain tuples, inside the
transaction the pooled connection began: building SQLAlchemy's parameters cost as much
as the insert itself.
"""

from __future__ import annotations

import sqlite3
import time
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import Any

from sqlalchemy import Connection

from ..errors import StoreUnavailable
from ..store import Store
from ..store.engine import map_store_errors
from .blobs import TOUCH_MS, insert_blobs

__all__ = ["BlobWriter"]

#: SQLite's default ``wal_autocheckpoint`` (pages), restored before the connection is
#: handed back to the pool so no other writer inherits the setting.
_SQLITE_AUTOCHECKPOINT = 1000
#: ``insert_blobs`` as SQLite's driver takes it (a digest already stored is only touched).
#: TOUCH_MS is this package's constant: no input reaches the statement.
_SQLITE_INSERT = (
    "INSERT INTO blobs (digest, size, data, touched_ms) VALUES (?, ?, ?, ?) "  # noqa: S608
    "ON CONFLICT (digest) DO UPDATE SET touched_ms = excluded.touched_ms "
    f"WHERE blobs.touched_ms IS NULL OR blobs.touched_ms < excluded.touched_ms - {TOUCH_MS}"
)


class BlobWriter:
    """Write blob batches through one pooled connection; use as a context manager."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._sqlite = store.dialect_name == "sqlite"
        self._conn: Connection | None = None
        self._checkpointer = ThreadPoolExecutor(1) if self._sqlite else None
        self._checkpoint: Future[None] | None = None

    def __enter__(self) -> BlobWriter:
        with map_store_errors("write"):
            self._conn = self._store.engine.connect()
            if self._sqlite:
                _pragma(self._conn, "PRAGMA wal_autocheckpoint=0")
        return self

    def write(self, rows: list[tuple[str, int, bytes]]) -> None:
        """Insert ``(digest, size, data)`` rows in one transaction (digests already stored
        are skipped)."""
        if not rows or self._conn is None:
            return
        with map_store_errors("write"), self._conn.begin():
            if self._sqlite:
                try:
                    _raw_executemany(self._conn.connection.driver_connection, rows)
                except sqlite3.Error as exc:
                    raise StoreUnavailable(f"write: store unavailable ({exc})") from exc
            else:
                insert_blobs(
                    self._conn, [{"digest": d, "size": n, "data": data} for d, n, data in rows]
                )
        if self._checkpointer is not None and (self._checkpoint is None or self._checkpoint.done()):
            # One checkpoint at a time; a later one picks up every frame committed since.
            self._checkpoint = self._checkpointer.submit(self._checkpoint_once)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if self._checkpointer is not None:
                self._checkpointer.shutdown(wait=True)
            if self._checkpoint is not None and exc is None:
                self._checkpoint.result()
            if self._conn is not None and self._sqlite:
                with map_store_errors("write"):
                    _pragma(self._conn, f"PRAGMA wal_autocheckpoint={_SQLITE_AUTOCHECKPOINT}")
                    # Copy what the background checkpoints did not reach yet.
                    _pragma(self._conn, "PRAGMA wal_checkpoint(PASSIVE)")
        finally:
            if self._conn is not None:
                self._conn.close()

    def _checkpoint_once(self) -> None:
        with map_store_errors("checkpoint"):
            raw = self._store.engine.raw_connection()
        try:
            _raw_pragma(raw.driver_connection, "PRAGMA wal_checkpoint(PASSIVE)")
        finally:
            raw.close()


def _pragma(conn: Connection, sql: str) -> None:
    # On the DB-API connection (autocommit: isolation_level None), so the engine's
    # ``begin`` hook does not wrap the pragma in BEGIN IMMEDIATE.
    _raw_pragma(conn.connection.driver_connection, sql)


def _raw_executemany(driver_connection: Any, rows: list[tuple[str, int, bytes]]) -> None:
    now = time.time_ns() // 1_000_000
    driver_connection.executemany(_SQLITE_INSERT, [(*row, now) for row in rows])


def _raw_pragma(driver_connection: Any, sql: str) -> None:
    try:
        driver_connection.execute(sql).fetchall()
    except sqlite3.Error as exc:
        raise StoreUnavailable(f"write: store unavailable ({exc})") from exc
