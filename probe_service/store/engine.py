"""Engine construction for both backends, and the one place SQLAlchemy errors are mapped."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy import exc as sa_exc

from ..errors import Conflict, InvalidInput, StoreUnavailable

__all__ = ["create_store_engine", "map_store_errors"]

#: Seconds SQLite waits for a competing writer before reporting the store busy.
SQLITE_BUSY_TIMEOUT_S = 30


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
        return create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=5)
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
