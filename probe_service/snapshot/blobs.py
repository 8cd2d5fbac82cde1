"""Content-addressed blobs: SHA-256 of the raw bytes, stored zstd-compressed once."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator

import zstandard
from sqlalchemy import Connection, select

from ..canonical import sha256_hex
from ..errors import NotFound, UnsafePath
from ..store import Store, insert_on_conflict
from ..store.schema import blobs

__all__ = ["TOUCH_MS", "decompress_blob", "fetch_compressed", "insert_blobs", "read_blob"]

#: A blob stored again within this long of its last touch is not touched again: the
#: touch rewrites the row, and once per interval is enough for gc's grace period (its
#: floor, MIN_GRACE_MINUTES, is three intervals).
TOUCH_MS = 10 * 60 * 1000

#: Digests fetched per query while materializing.
FETCH_BATCH = 256


def insert_blobs(conn: Connection, rows: list[dict[str, object]]) -> None:
    """Insert ``{digest, size, data}`` rows; a digest already stored is not written again,
    only touched (docs/ARCHITECTURE.md, "Retention and gc": a writer that deduplicates
    against a stored blob makes it young again, so gc's grace period covers its capture)."""
    if not rows:
        return
    now = time.time_ns() // 1_000_000
    stmt = insert_on_conflict(conn, blobs)
    stmt = stmt.on_conflict_do_update(
        index_elements=["digest"],
        set_={"touched_ms": stmt.excluded.touched_ms},
        where=blobs.c.touched_ms.is_(None) | (blobs.c.touched_ms < now - TOUCH_MS),
    )
    conn.execute(stmt, [{**row, "touched_ms": now} for row in rows])


_local = threading.local()


def decompress_blob(digest: str, data: bytes, size: int | None = None) -> bytes:
    """Decompress a stored blob and check it still hashes to ``digest``.

    ``size`` (from the manifest) bounds the output; one decompressor is kept per thread.
    Raises UnsafePath when the stored bytes are corrupt or do not match the digest.
    """
    try:
        if size is None:
            raw = zstandard.ZstdDecompressor().decompressobj().decompress(data)
        else:
            decompressor = getattr(_local, "decompressor", None)
            if decompressor is None:
                decompressor = _local.decompressor = zstandard.ZstdDecompressor()
            raw = decompressor.decompress(data, max_output_size=size)
    except zstandard.ZstdError as exc:
        raise UnsafePath(f"blob {digest}: stored data is corrupt ({exc})") from exc
    if sha256_hex(raw) != digest:
        raise UnsafePath(f"blob {digest}: stored data does not match its digest")
    return raw


def fetch_compressed(conn: Connection, digests: Iterable[str]) -> Iterator[tuple[str, bytes]]:
    """Yield ``(digest, stored compressed bytes)`` for every digest, in batches.

    Raises NotFound when a digest is not stored.
    """
    wanted = sorted(set(digests))
    for start in range(0, len(wanted), FETCH_BATCH):
        batch = wanted[start : start + FETCH_BATCH]
        rows = conn.execute(select(blobs.c.digest, blobs.c.data).where(blobs.c.digest.in_(batch)))
        found = 0
        for digest, data in rows:
            found += 1
            yield digest, data
        if found != len(batch):
            raise NotFound(f"blob: {len(batch) - found} of the snapshot's blobs are not stored")


def read_blob(store: Store, digest: str) -> bytes:
    """Return the raw bytes of one blob.

    Raises NotFound when the digest is not stored, UnsafePath when it is corrupt.
    """
    with store.reading() as conn:
        row = conn.execute(select(blobs.c.data).where(blobs.c.digest == digest)).first()
    if row is None:
        raise NotFound(f"blob {digest}: not stored")
    return decompress_blob(digest, row.data)
