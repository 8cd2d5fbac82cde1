"""The one place the two backends' INSERT … ON CONFLICT constructs are chosen."""

from __future__ import annotations

from sqlalchemy import Connection, Table
from sqlalchemy.dialects import postgresql, sqlite

__all__ = ["insert_on_conflict"]


def insert_on_conflict(conn: Connection, table: Table) -> postgresql.Insert | sqlite.Insert:
    """Return an INSERT for ``conn``'s backend that supports ``on_conflict_do_*``."""
    if conn.dialect.name == "postgresql":
        return postgresql.insert(table)
    return sqlite.insert(table)
