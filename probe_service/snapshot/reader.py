"""Stream one file into a digest and a compressed blob under fixed limits."""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass

import zstandard

from ..errors import LimitExceeded, UnstableWorkingTree

__all__ = ["CHUNK_BYTES", "FileStat", "ReadBlob", "read_file_blob", "stat_key"]

#: Files are read in chunks of this size; no file is ever buffered whole before hashing.
CHUNK_BYTES = 1 << 20

#: (size, mtime_ns, ctime_ns, inode, mode): what must not move while a file is captured.
FileStat = tuple[int, int, int, int, int]


def stat_key(st: os.stat_result) -> FileStat:
    """Return the fields of ``st`` that identify one version of a file."""
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode)


@dataclass(frozen=True)
class ReadBlob:
    """A file read once: its digest, raw size and zstd-compressed bytes."""

    path: str
    digest: str
    size: int
    data: bytes


def read_file_blob(abs_path: str, rel_path: str, expected: FileStat, max_bytes: int) -> ReadBlob:
    """Hash and compress ``abs_path`` in fixed-size chunks without following a link.

    Raises LimitExceeded when the file grows past ``max_bytes`` while being read, and
    UnstableWorkingTree when the opened file is not the one that was stat'ed.
    """
    try:
        fd = os.open(abs_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise UnstableWorkingTree(f"{rel_path}: changed while capturing ({exc.strerror})") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or stat_key(st) != expected:
            raise UnstableWorkingTree(f"{rel_path}: changed while capturing")
        hasher = hashlib.sha256()
        compressor = zstandard.ZstdCompressor(level=1).compressobj(size=expected[0])
        parts: list[bytes] = []
        size = 0
        while chunk := os.read(fd, CHUNK_BYTES):
            size += len(chunk)
            if size > max_bytes:
                raise LimitExceeded(
                    f"{rel_path}: file grew past the {max_bytes}-byte file limit while read"
                )
            hasher.update(chunk)
            parts.append(compressor.compress(chunk))
        parts.append(compressor.flush())
    finally:
        os.close(fd)
    if size != expected[0]:
        raise UnstableWorkingTree(f"{rel_path}: size changed while capturing")
    return ReadBlob(path=rel_path, digest=hasher.hexdigest(), size=size, data=b"".join(parts))
