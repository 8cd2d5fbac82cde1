"""A writer's hold on the objects it references, against a concurrent ``gc``.

docs/ARCHITECTURE.md, "Retention and gc": a writer that reads an object in one
transaction and commits a reference to it in another (a claim citing a receipt) checks,
inside the committing transaction, that the object is still stored. On PostgreSQL the
check takes ``FOR KEY SHARE`` row locks: a gc batch locks its candidates ``FOR UPDATE``
before re-checking their references, so either the writer waits for the batch (and then
finds the object gone, and refuses) or the batch waits for the writer (and then finds the
reference, and keeps the object). SQLite runs one write transaction at a time.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import Column, Connection, select

from .schema import gc_tombstones

__all__ = ["gc_removed", "hold_referents"]


def gc_removed(conn: Connection, kind: str) -> bool:
    """Whether gc ever removed an object of ``kind`` from this store."""
    stmt = select(gc_tombstones.c.batch_id).where(gc_tombstones.c.kind == kind).limit(1)
    return conn.execute(stmt).first() is not None


def hold_referents(conn: Connection, column: Column[str], values: Iterable[str]) -> set[str]:
    """Which of ``values`` ``column`` holds, held against gc until the transaction ends."""
    wanted = sorted(set(values))
    if not wanted:
        return set()
    stmt = select(column).where(column.in_(wanted))
    if conn.dialect.name == "postgresql":
        stmt = stmt.with_for_update(key_share=True, read=True)
    return {str(v) for v in conn.execute(stmt).scalars()}
