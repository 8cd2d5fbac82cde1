"""A stat cache, as git's index keeps one, so an unchanged file is not read again.

An entry is keyed on path, size, mtime_ns, ctime_ns, inode and mode. Racy-timestamp
protection: a file whose mtime or ctime falls within ``racy_window_ns`` of the moment
the capture began is never cached, because a later write in the same timestamp tick
could leave every stat field unchanged.

A root's entries are one packed value (``stat_packs``), read and replaced whole: a row a
file cost as much to load as the two stat passes of an unchanged recapture
(docs/ARCHITECTURE.md, "Snapshot capture"). The pack is little-endian::

    b"SP1\\0", count (u32), bytes of names (u32),
    names (UTF-8, NUL-separated), count x (size, mtime_ns, ctime_ns, mode) (i64),
    count x inode (u64), count x SHA-256 (32 bytes)

A pack that does not decode is an empty cache: every file is read again.
"""

from __future__ import annotations

import socket
import struct
import sys
from array import array
from collections.abc import Mapping
from dataclasses import dataclass, field
from operator import itemgetter

from sqlalchemy import Connection, select

from ..store import insert_on_conflict
from ..store.schema import stat_packs
from .reader import FileStat

__all__ = [
    "CachedFiles",
    "StatCache",
    "cache_key_for",
    "decode_pack",
    "encode_pack",
    "is_racy",
    "load_stat_cache",
    "none_racy",
    "save_stat_cache",
]

#: ``path -> (stat, digest)``.
StatCache = dict[str, tuple[FileStat, str]]


@dataclass(frozen=True)
class CachedFiles:
    """A loaded cache as two maps over the same paths: ``path -> stat`` and ``path ->
    digest`` (so a tree that did not move is recognised by one comparison of maps)."""

    stats: dict[str, FileStat] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.stats)


_MTIME, _CTIME = itemgetter(1), itemgetter(2)
_MAGIC = b"SP1\0"
_HEADER = struct.Struct("<4sII")
_SWAP = sys.byteorder != "little"


def cache_key_for(abs_root: str) -> str:
    """Return the cache namespace of a root; the host name keeps shared stores apart."""
    return f"{socket.gethostname()}:{abs_root}"


def load_stat_cache(conn: Connection, key: str) -> CachedFiles:
    """Return the stat and digest of every cached file under ``key``."""
    data = conn.execute(select(stat_packs.c.entries).where(stat_packs.c.root == key)).scalar()
    return CachedFiles() if data is None else decode_files(bytes(data))


def save_stat_cache(
    conn: Connection, key: str, entries: Mapping[str, tuple[FileStat, str]]
) -> None:
    """Replace the cache under ``key`` by ``entries``."""
    stmt = insert_on_conflict(conn, stat_packs)
    stmt = stmt.on_conflict_do_update(
        index_elements=["root"], set_={"entries": stmt.excluded.entries}
    )
    conn.execute(stmt, {"root": key, "entries": encode_pack(entries)})


def is_racy(st: FileStat, capture_start_ns: int, racy_window_ns: int) -> bool:
    """Return whether a file's timestamps are too recent to trust a cache entry for it."""
    return max(st[1], st[2]) >= capture_start_ns - racy_window_ns


def none_racy(stats: Mapping[str, FileStat], capture_start_ns: int, racy_window_ns: int) -> bool:
    """Return whether no file of ``stats`` is racy (``is_racy`` of every one, at once)."""
    if not stats:
        return True
    recent = capture_start_ns - racy_window_ns
    # Each field's maximum in C (a generator of max() a file costs ten times more).
    latest: int = max(max(map(_MTIME, stats.values())), max(map(_CTIME, stats.values())))
    return latest < recent


def encode_pack(entries: Mapping[str, tuple[FileStat, str]]) -> bytes:
    """The packed form of ``entries`` (paths never hold a NUL)."""
    names = "\0".join(entries).encode("utf-8")
    fields = array("q")
    inodes = array("Q")
    for (size, mtime, ctime, inode, mode), _ in entries.values():
        fields.extend((size, mtime, ctime, mode))
        inodes.append(inode)
    if _SWAP:
        fields.byteswap()
        inodes.byteswap()
    digests = bytes.fromhex("".join(digest for _, digest in entries.values()))
    header = _HEADER.pack(_MAGIC, len(entries), len(names))
    return b"".join((header, names, fields.tobytes(), inodes.tobytes(), digests))


def decode_pack(data: bytes) -> StatCache:
    """The entries of a pack; an empty cache for anything that is not a whole pack."""
    files = decode_files(data)
    digests = files.digests
    return {path: (st, digests[path]) for path, st in files.stats.items()}


def decode_files(data: bytes) -> CachedFiles:
    """The files of a pack; no file for anything that is not a whole pack."""
    try:
        magic, count, names_size = _HEADER.unpack_from(data)
    except struct.error:
        return CachedFiles()
    start = _HEADER.size
    ends = [start + names_size]
    ends += [ends[-1] + 32 * count, ends[-1] + 32 * count + 8 * count]
    if magic != _MAGIC or ends[-1] + 32 * count != len(data):
        return CachedFiles()
    try:
        names = data[start : ends[0]].decode("utf-8").split("\0") if count else []
    except UnicodeDecodeError:
        return CachedFiles()
    fields, inodes = array("q"), array("Q")
    fields.frombytes(data[ends[0] : ends[1]])
    inodes.frombytes(data[ends[1] : ends[2]])
    if _SWAP:
        fields.byteswap()
        inodes.byteswap()
    if len(names) != count:
        return CachedFiles()
    hexed = data[ends[2] :].hex()
    # (size, mtime, ctime, inode, mode) from the four-field rows and the inodes, in C.
    stats = zip(fields[0::4], fields[1::4], fields[2::4], inodes, fields[3::4], strict=True)
    digests = (hexed[i : i + 64] for i in range(0, 64 * count, 64))
    return CachedFiles(dict(zip(names, stats, strict=True)), dict(zip(names, digests, strict=True)))
