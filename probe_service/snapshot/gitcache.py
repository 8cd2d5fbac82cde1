"""The caches of captures from git objects, rows of ``stat_packs`` (no schema of their own).

Both are kept per host and object directory: one repository's objects never answer for
another's. What they hold was read and checked against its object id first
(``GitObjects.contents``), so an object id names the bytes the cached answer came from.

- **Tree ids** (``git:tree:<host>:<objects>:<tree>``): the capture's summary as JSON, so a
  recapture of a ref whose tree is unchanged costs one object lookup and one store read.
- **Blob ids** (``git:blobs:<host>:<objects>``): ``git blob id -> (SHA-256, size)`` of the
  files of the last trees captured, one packed value read and replaced whole (as the stat
  cache, ``statcache.py``), so the head of a change reads only the blobs its base did not
  have. The pack is little-endian::

      b"GB1\\0", id width (u32: 20 or 32), count (u32),
      count x (git id (width bytes), SHA-256 (32 bytes), size (u64))

  A pack that does not decode is an empty cache: every blob is read.

(A stat pack's key is ``host:/absolute/root``; a host name holds no ``:``, so none starts
with ``git:``.)
"""

from __future__ import annotations

import json
import socket
import struct

from sqlalchemy import Connection, select

from ..store import Store, insert_on_conflict
from ..store.schema import snapshots, stat_packs

__all__ = [
    "MAX_BLOB_ENTRIES",
    "BlobCache",
    "blob_cache_key",
    "load_blob_cache",
    "load_tree_summary",
    "save_blob_cache",
    "save_tree_summary",
    "tree_cache_key",
]

#: ``git blob id -> (SHA-256 hex, size)``.
BlobCache = dict[str, tuple[str, int]]
#: Entries a blob pack keeps; past it only the tree just captured is kept.
MAX_BLOB_ENTRIES = 200_000
_MAGIC = b"GB1\0"
_HEADER = struct.Struct("<4sII")
_SIZE = struct.Struct("<Q")


def tree_cache_key(objects: str, tree: str) -> str:
    """The tree-id cache key of ``tree`` read from the object directory ``objects``."""
    return f"git:tree:{socket.gethostname()}:{objects}:{tree}"


def blob_cache_key(objects: str) -> str:
    """The blob-id cache key of the object directory ``objects``."""
    return f"git:blobs:{socket.gethostname()}:{objects}"


def load_tree_summary(store: Store, key: str) -> dict[str, object] | None:
    """The summary stored under ``key``, if it decodes and its snapshot is still stored."""
    with store.reading() as conn:
        data = conn.execute(select(stat_packs.c.entries).where(stat_packs.c.root == key)).scalar()
        if data is None:
            return None
        try:
            summary = json.loads(bytes(data))
            snapshot_id = str(summary["snapshot_id"])
        except (ValueError, KeyError, TypeError):
            return None  # a row that does not decode is no cache
        stored = conn.execute(
            select(snapshots.c.snapshot_id).where(snapshots.c.snapshot_id == snapshot_id)
        ).first()
    return summary if stored is not None and isinstance(summary, dict) else None


def save_tree_summary(conn: Connection, key: str, summary: dict[str, object]) -> None:
    """Keep ``summary`` under ``key`` (a tree's summary never changes: the first stays)."""
    stmt = insert_on_conflict(conn, stat_packs).on_conflict_do_nothing(index_elements=["root"])
    conn.execute(stmt, [{"root": key, "entries": json.dumps(summary).encode()}])


def load_blob_cache(store: Store, key: str) -> BlobCache:
    """The blob ids cached under ``key`` (empty when none or undecodable)."""
    with store.reading() as conn:
        data = conn.execute(select(stat_packs.c.entries).where(stat_packs.c.root == key)).scalar()
    return {} if data is None else decode_blob_pack(bytes(data))


def save_blob_cache(conn: Connection, key: str, cache: BlobCache) -> None:
    """Replace the pack under ``key`` with ``cache``."""
    stmt = insert_on_conflict(conn, stat_packs)
    packed = encode_blob_pack(cache)
    conn.execute(
        stmt.on_conflict_do_update(index_elements=["root"], set_={"entries": packed}),
        [{"root": key, "entries": packed}],
    )


def encode_blob_pack(cache: BlobCache) -> bytes:
    """The packed form of ``cache`` (every id of one width)."""
    width = len(next(iter(cache), "0" * 40)) // 2
    parts = [_HEADER.pack(_MAGIC, width, len(cache))]
    for oid, (digest, size) in cache.items():
        parts += [bytes.fromhex(oid), bytes.fromhex(digest), _SIZE.pack(size)]
    return b"".join(parts)


def decode_blob_pack(data: bytes) -> BlobCache:
    """``encode_blob_pack`` undone; a pack that does not decode is an empty cache."""
    try:
        magic, width, count = _HEADER.unpack_from(data)
        step = width + 32 + _SIZE.size
        if magic != _MAGIC or width not in (20, 32) or len(data) != _HEADER.size + count * step:
            return {}
        cache: BlobCache = {}
        for pos in range(_HEADER.size, len(data), step):
            oid = data[pos : pos + width].hex()
            digest = data[pos + width : pos + width + 32].hex()
            cache[oid] = (digest, _SIZE.unpack_from(data, pos + width + 32)[0])
        return cache
    except struct.error:
        return {}
