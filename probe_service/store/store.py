"""The ``Store``: one engine, migrated to head, with explicit read and write transactions."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from sqlalchemy import Connection, Engine

from ..errors import StoreUnavailable
from ..settings import DATABASE_URL_ENV
from .engine import connection_dropped, create_store_engine, map_store_errors
from .migrate import upgrade_to_head
from .safety import DB_FILENAME, check_database_files, prepare_state_dir

__all__ = ["DATABASE_URL_ENV", "RECONNECT_ATTEMPTS", "Store", "open_store"]

log = logging.getLogger(__name__)
_T = TypeVar("_T")

#: Times ``Store.retrying`` runs a transaction whose connection dropped: the first try,
#: then fresh connections (the pool replaces every connection older than the drop).
RECONNECT_ATTEMPTS = 3


class Store:
    """A migrated database; pass it explicitly to every operation (no global store)."""

    def __init__(self, engine: Engine, *, root: Path, url: str) -> None:
        self.engine = engine
        self.root = root
        self.url = url

    @property
    def dialect_name(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self.engine.dialect.name

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """Yield a connection inside one write transaction, committed on success.

        Raises StoreUnavailable when the database fails, Conflict on a refused write.
        """
        with map_store_errors("write"), self.engine.begin() as conn:
            yield conn

    @contextmanager
    def reading(self) -> Iterator[Connection]:
        """Yield a connection inside a read transaction that never takes the write lock.

        Raises StoreUnavailable when the database fails.
        """
        with (
            map_store_errors("read"),
            self.engine.connect() as conn,
            conn.execution_options(probe_read_only=True).begin(),
        ):
            yield conn

    def retrying(
        self, body: Callable[[Connection], _T], *, what: str = "write", read: bool = False
    ) -> _T:
        """Run ``body(conn)`` in one transaction (a read one with ``read``) and return its
        result; when the connection drops, run it again on a fresh one.

        ``body`` must be safe to run twice: a commit whose answer was lost may have
        landed (docs/ARCHITECTURE.md, "Lean store path": the store path's two
        transactions are). Raises StoreUnavailable after RECONNECT_ATTEMPTS drops, or at
        once for any other failure; Conflict on a refused write.
        """
        for attempt in range(1, RECONNECT_ATTEMPTS + 1):
            try:
                with self.reading() if read else self.transaction() as conn:
                    return body(conn)
            except StoreUnavailable as exc:
                if attempt == RECONNECT_ATTEMPTS or not connection_dropped(exc):
                    raise
                log.warning("%s: store connection dropped (%s); retrying", what, exc)
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def close(self) -> None:
        """Release every pooled connection."""
        self.engine.dispose()


def open_store(root: Path, url: str | None = None) -> Store:
    """Open the store for ``root``: ``url`` if given, else SQLite under ``<root>/.zyte``.

    Raises UnsafePath before anything opens when the state directory or a database file
    is unsafe, StoreUnavailable when the database cannot be reached or migrated.
    """
    root = Path(os.path.abspath(root))
    if not url:
        state = prepare_state_dir(root)
        db_path = state / DB_FILENAME
        check_database_files(db_path)
        url = f"sqlite+pysqlite:///{db_path}"
    engine = create_store_engine(url)
    try:
        with map_store_errors("migrate"):
            upgrade_to_head(engine)
    except BaseException:
        engine.dispose()
        raise
    return Store(engine, root=root, url=url)
