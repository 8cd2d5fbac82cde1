"""A stat cache, as git's index keeps one, so an unchanged file is not read again.

An entry is keyed on path, size, mtime_ns, ctime_ns, inode and mode. Racy-timestamp
protection: a file whose mtime or ctime falls within ``racy_window_ns`` of the moment
the capture began is never cached, because a later write in the same timestamp tick
could leave every stat field unchanged.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable

from sqlalchemy import Connection, select

from ..store import insert_on_conflict
from ..store.schema import stat_cache
from .reader import FileStat

__all__ = ["cache_key_for", "is_racy", "load_stat_cache", "save_stat_cache"]


def cache_key_for(abs_root: str) -> str:
    """Return the cache namespace of a root; the host name keeps shared stores apart."""
    return f"{socket.gethostname()}:{abs_root}"


def load_stat_cache(conn: Connection, key: str) -> dict[str, tuple[FileStat, str]]:
    """Return ``path -> (stat, digest)`` for every cached file under ``key``."""
    c = stat_cache.c
    rows = conn.execute(
        select(c.path, c.size, c.mtime_ns, c.ctime_ns, c.inode, c.mode, c.digest).where(
            c.root == key
        )
    )
    return {path: ((sz, mt, ct, ino, mode), digest) for path, sz, mt, ct, ino, mode, digest in rows}


def is_racy(st: FileStat, capture_start_ns: int, racy_window_ns: int) -> bool:
    """Return whether a file's timestamps are too recent to trust a cache entry for it."""
    return max(st[1], st[2]) >= capture_start_ns - racy_window_ns


def save_stat_cache(
    conn: Connection, key: str, entries: Iterable[tuple[str, FileStat, str]]
) -> None:
    """Upsert ``(path, stat, digest)`` entries under ``key``."""
    rows = [
        {
            "root": key,
            "path": path,
            "size": st[0],
            "mtime_ns": st[1],
            "ctime_ns": st[2],
            "inode": st[3],
            "mode": st[4],
            "digest": digest,
        }
        for path, st, digest in entries
    ]
    if not rows:
        return
    stmt = insert_on_conflict(conn, stat_cache)
    stmt = stmt.on_conflict_do_update(
        index_elements=["root", "path"],
        set_={
            c: stmt.excluded[c] for c in ("size", "mtime_ns", "ctime_ns", "inode", "mode", "digest")
        },
    )
    conn.execute(stmt, rows)
