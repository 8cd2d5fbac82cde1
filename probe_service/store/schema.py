"""SQLAlchemy Core tables of the foundation: blobs, snapshots, the stat cache and events.

Each part adds its own tables to this ``metadata`` in its own module; migrations under
``migrations/versions`` are the only way the schema changes.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
)

__all__ = [
    "blobs",
    "event_consumers",
    "event_outbox",
    "events",
    "gc_lock",
    "gc_token",
    "gc_tombstones",
    "metadata",
    "snapshots",
    "stat_packs",
]

metadata = MetaData()

#: SQLite only aliases ROWID (and so autoincrements) for a column typed exactly INTEGER.
CursorInt = BigInteger().with_variant(Integer(), "sqlite")

blobs = Table(
    "blobs",
    metadata,
    Column("digest", String(64), primary_key=True),
    Column("size", BigInteger, nullable=False),
    Column("data", LargeBinary, nullable=False),
    #: When a writer last stored the blob or found it stored (ms since the epoch; NULL:
    #: before ``0016_gc``). gc's grace period counts from here (docs/ARCHITECTURE.md,
    #: "Retention and gc", touches).
    Column("touched_ms", BigInteger, nullable=True),
)

snapshots = Table(
    "snapshots",
    metadata,
    Column("snapshot_id", String(64), primary_key=True),
    Column("manifest", LargeBinary, nullable=False),
    Column("files", Integer, nullable=False),
    Column("bytes", BigInteger, nullable=False),
    Column("created_at", String(32), nullable=False),
)

#: The stat cache, one packed value per capture root (``snapshot/statcache.py``).
stat_packs = Table(
    "stat_packs",
    metadata,
    Column("root", Text, primary_key=True),
    Column("entries", LargeBinary, nullable=False),
)

events = Table(
    "events",
    metadata,
    Column("cursor", CursorInt, primary_key=True, autoincrement=True),
    Column("kind", String(64), nullable=False),
    Column("subject", String(128), nullable=False),
    Column("payload", Text, nullable=False),
    Column("created_at", String(32), nullable=False),
    sqlite_autoincrement=True,
)

#: Events written on PostgreSQL and not yet given their cursor (migration
#: ``0012_event_outbox``; docs/ARCHITECTURE.md, "Event cursor"). A writer inserts here
#: without any lock; the next reader moves committed rows into ``events``, numbering them
#: after the newest cursor, so the cursor is dense and a reader never passes an event that
#: commits later. SQLite (one writer at a time) writes ``events`` directly and leaves this
#: table empty.
event_outbox = Table(
    "event_outbox",
    metadata,
    Column("id", CursorInt, primary_key=True, autoincrement=True),
    Column("kind", String(64), nullable=False),
    Column("subject", String(128), nullable=False),
    Column("payload", Text, nullable=False),
    Column("created_at", String(32), nullable=False),
)

#: Named consumers of ``knowledge_events`` and the cursor each last acknowledged.
event_consumers = Table(
    "event_consumers",
    metadata,
    Column("consumer", String(128), primary_key=True),
    Column("cursor", BigInteger, nullable=False),
    Column("acknowledged_at", String(32), nullable=False),
)

#: One row per gc batch, in the batch's transaction (migration ``0016_gc``; insert-only).
#: ``floor`` is, for an events batch, the highest cursor it removed: a reader resuming
#: below the highest floor is told ``cursor_expired`` (docs/ARCHITECTURE.md, "Retention
#: and gc").
gc_tombstones = Table(
    "gc_tombstones",
    metadata,
    Column("batch_id", CursorInt, primary_key=True, autoincrement=True),
    Column("at", String(32), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("removed", Integer, nullable=False),
    Column("logical_bytes", BigInteger, nullable=False),
    Column("stored_bytes", BigInteger, nullable=False),
    Column("ids_sha256", String(64), nullable=False),
    Column("policy_digest", String(64), nullable=False),
    Column("ran_by", String(255), nullable=False),
    Column("floor", BigInteger, nullable=True),
    sqlite_autoincrement=True,
)

#: Visible only inside a gc batch's own transaction; the append-only triggers let a
#: DELETE through only while a row is visible.
gc_token = Table("gc_token", metadata, Column("holder", String(255), primary_key=True))

#: Who holds (or last held) the gc lock, so a refused second gc can name it.
gc_lock = Table(
    "gc_lock",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("holder", String(255), nullable=False),
    Column("since", String(32), nullable=False),
)
