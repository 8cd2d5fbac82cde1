"""The one place the two backends' INSERT … ON CONFLICT constructs are chosen."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import Connection, Table

if TYPE_CHECKING:
    from sqlalchemy.dialects import postgresql, sqlite

__all__ = ["insert_on_conflict"]


def insert_on_conflict(conn: Connection, table: Table) -> postgresql.Insert | sqlite.Insert:
    """Return an INSERT for ``conn``'s backend that supports ``on_conflict_do_*``."""
    # Imported here: the PostgreSQL dialect package loads every driver (asyncpg and its
    # asyncio included), which a store read on SQLite never needs.
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects import postgresql

        return postgresql.insert(table)
    from sqlalchemy.dialects import sqlite

    return sqlite.insert(table)
