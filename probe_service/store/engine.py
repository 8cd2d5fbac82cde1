"""Engine construction for both backends, and the one place SQLAlchemy errors are mapped."""

from __future__ import annotations

import select
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy import exc as sa_exc

from ..errors import Conflict, InvalidInput, NotPermitted, StoreUnavailable

__all__ = ["connection_dropped", "create_store_engine", "map_store_errors"]

#: Seconds SQLite waits for a competing writer before reporting the store busy.
SQLITE_BUSY_TIMEOUT_S = 30

#: Pooled PostgreSQL connections per process: a worker's threads each hold one for a
#: transaction at a time, and a wait for a connection would serialize them again.
PG_POOL_SIZE = 8
PG_POOL_OVERFLOW = 16


def create_store_engine(url: str) -> Engine:
    """Create an engine for ``url``; SQLite gets WAL, a busy timeout, foreign keys and
    ``BEGIN IMMEDIATE`` for write transactions.

    Raises StoreUnavailable when the URL names no usable driver.
    """
    try:
        if url.startswith("sqlite"):
            engine = create_engine(
                url,
                connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S, "check_same_thread": False},
            )
            _configure_sqlite(engine)
            return engine
        # No pre-ping: it cost a round trip before every transaction (docs/ARCHITECTURE.md,
        # "Lean store path"). A connection the server closed is noticed at checkout
        # without one, and a drop mid-transaction is retried by ``Store.retrying``.
        engine = create_engine(url, pool_size=PG_POOL_SIZE, max_overflow=PG_POOL_OVERFLOW)
        event.listen(engine, "checkout", _refuse_closed_by_server)
        return engine
    except (sa_exc.ArgumentError, sa_exc.NoSuchModuleError, ImportError) as exc:
        raise StoreUnavailable(f"store URL {_redact(url)!r} is not usable: {exc}") from exc


def _configure_sqlite(engine: Engine) -> None:
    """Hand transaction control to us so a write takes the lock up front (no upgrade deadlock)."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        # Blobs run to megabytes; larger pages mean shorter overflow chains. Only takes
        # effect when the database file is created.
        cursor.execute("PRAGMA page_size=32768")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_S * 1000}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        # Reads ask for a deferred transaction so they never queue behind writers.
        if conn.get_execution_options().get("probe_read_only"):
            conn.exec_driver_sql("BEGIN")
        else:
            conn.exec_driver_sql("BEGIN IMMEDIATE")


def _refuse_closed_by_server(dbapi_conn: Any, _record: Any, _proxy: Any) -> None:
    """Refuse a pooled connection the server has already closed, without a round trip.

    An idle connection receives nothing unless the server ends it (a terminated backend,
    a restart: PostgreSQL sends its FATAL notice, then EOF), so a socket that polls
    readable at checkout is dead; the pool opens another (``DisconnectionError``).
    """
    pgconn = getattr(dbapi_conn, "pgconn", None)
    if pgconn is None or getattr(dbapi_conn, "closed", False):
        return
    try:
        fd = pgconn.socket
    except Exception:
        raise sa_exc.DisconnectionError("store connection already closed") from None
    readable, _, _ = select.select([fd], [], [], 0)
    if readable:
        raise sa_exc.DisconnectionError("store connection closed by the server while idle")


def connection_dropped(exc: BaseException) -> bool:
    """Whether ``exc`` (as ``map_store_errors`` raised it) says the connection was lost,
    so the transaction never committed or its outcome is unknown, and a retry on a
    fresh connection may succeed."""
    cause = exc.__cause__
    return isinstance(cause, sa_exc.DBAPIError) and bool(cause.connection_invalidated)


@contextmanager
def map_store_errors(what: str) -> Iterator[None]:
    """Translate SQLAlchemy errors raised inside the block into the service's tree."""
    try:
        yield
    except sa_exc.IntegrityError as exc:
        raise Conflict(f"{what}: the store refused the write ({exc.orig})") from exc
    except sa_exc.DataError as exc:
        # A value the database cannot hold (PostgreSQL text with a NUL byte) came from the
        # caller: bad input with the same code on every face, never an internal error.
        raise InvalidInput(f"{what}: the store refused a value ({exc.orig})") from exc
    except (sa_exc.OperationalError, sa_exc.InterfaceError) as exc:
        raise StoreUnavailable(f"{what}: store unavailable ({exc.orig})") from exc
    except sa_exc.ProgrammingError as exc:
        # SQLSTATE 42501: the database role may not write this (its grants or a row-level
        # security policy: docs/ARCHITECTURE.md, "Principals and clearing").
        if getattr(exc.orig, "sqlstate", None) == "42501":
            raise NotPermitted(
                f"{what}: the store's grants refuse this write ({exc.orig})"
            ) from exc
        raise
    except sa_exc.DBAPIError as exc:
        if exc.connection_invalidated:
            raise StoreUnavailable(f"{what}: store connection lost ({exc.orig})") from exc
        raise


def _redact(url: str) -> str:
    """Hide a password in a URL before it reaches an error message."""
    head, sep, tail = url.partition("@")
    if not sep or ":" not in head.split("//", 1)[-1]:
        return url
    scheme, _, userinfo = head.partition("//")
    user = userinfo.split(":", 1)[0]
    return f"{scheme}//{user}:***@{tail}"
