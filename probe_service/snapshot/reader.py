"""Stream one file into a digest and a compressed blob under fixed limits."""

from __future__ import annotations

import hashlib
import os
import stat
import threading
from dataclasses import dataclass

import zstandard

from ..errors import LimitExceeded, UnstableWorkingTree

__all__ = [
    "CHUNK_BYTES",
    "FileStat",
    "ReadBlob",
    "hash_and_compress_bytes",
    "open_beneath",
    "open_dir_beneath",
    "read_file_blob",
    "stat_key",
]

#: Files are read in chunks of this size; no file is ever buffered whole before hashing.
CHUNK_BYTES = 1 << 20

#: zstd level of every blob.
BLOB_LEVEL = 1

#: A compressor per reading thread: building one costs ~15 us, and captures run
#: 10,000s of small files; a compressor is not safe to share between threads.
_local = threading.local()

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


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a file swapped for a FIFO after the scan must not block open() (the fstat
# in read_file_blob then refuses it); reads of a regular file ignore the flag.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def open_beneath(root_fd: int, rel_path: str) -> int:
    """Open ``rel_path`` under the directory ``root_fd`` following no link at any
    component, so a directory swapped for a link mid-capture is never read through.

    Raises OSError (ELOOP or ENOTDIR for a link).
    """
    parts = rel_path.split("/")
    fd = root_fd
    try:
        for part in parts[:-1]:
            child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            if fd != root_fd:
                os.close(fd)
            fd = child
        return os.open(parts[-1], _FILE_FLAGS, dir_fd=fd)
    finally:
        if fd != root_fd:
            os.close(fd)


def open_dir_beneath(root_fd: int, rel_dir: str) -> int:
    """Open the directory ``rel_dir`` under ``root_fd`` following no link at any
    component (``""`` gives a duplicate of ``root_fd``); the caller closes it.

    Raises OSError (ELOOP or ENOTDIR for a link).
    """
    fd = os.dup(root_fd)
    for part in rel_dir.split("/") if rel_dir else ():
        try:
            child = os.open(part, _DIR_FLAGS, dir_fd=fd)
        finally:
            os.close(fd)
        fd = child
    return fd


def read_file_blob(
    abs_path: str,
    rel_path: str,
    expected: FileStat,
    max_bytes: int,
    root_fd: int | None = None,
    dir_fd: int | None = None,
) -> ReadBlob:
    """Hash and compress ``abs_path`` in fixed-size chunks without following a link (with
    ``root_fd``: ``rel_path`` under it, following no link at any component; with
    ``dir_fd``, the descriptor ``open_dir_beneath`` gave for ``rel_path``'s directory:
    its last component under that).

    Raises LimitExceeded when the file grows past ``max_bytes`` while being read, and
    UnstableWorkingTree when the opened file is not the one that was stat'ed.
    """
    try:
        if dir_fd is not None:
            fd = os.open(rel_path.rpartition("/")[2], _FILE_FLAGS, dir_fd=dir_fd)
        elif root_fd is not None:
            fd = open_beneath(root_fd, rel_path)
        else:
            fd = os.open(abs_path, _FILE_FLAGS)
    except OSError as exc:
        raise UnstableWorkingTree(f"{rel_path}: changed while capturing ({exc.strerror})") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or stat_key(st) != expected:
            raise UnstableWorkingTree(f"{rel_path}: changed while capturing")
        digest, size, data = _hash_and_compress(fd, rel_path, expected[0], max_bytes)
    finally:
        os.close(fd)
    if size != expected[0]:
        raise UnstableWorkingTree(f"{rel_path}: size changed while capturing")
    return ReadBlob(path=rel_path, digest=digest, size=size, data=data)


def _compressor() -> zstandard.ZstdCompressor:
    compressor: zstandard.ZstdCompressor | None = getattr(_local, "compressor", None)
    if compressor is None:
        compressor = _local.compressor = zstandard.ZstdCompressor(level=BLOB_LEVEL)
    return compressor


def hash_and_compress_bytes(data: bytes) -> tuple[str, bytes]:
    """``(SHA-256 hex, zstd bytes)`` of bytes already in memory (a git blob)."""
    return hashlib.sha256(data).hexdigest(), _compressor().compress(data)


def _hash_and_compress(
    fd: int, rel_path: str, expected_size: int, max_bytes: int
) -> tuple[str, int, bytes]:
    """Stream ``fd`` in chunks into SHA-256 and zstd; return ``(digest, size, blob)``."""
    hasher = hashlib.sha256()
    # Ask for no more than the file should hold (+1 to notice growth): a 1 MiB request
    # for a 4 KB file costs a large allocation that is shrunk right away.
    first = os.read(fd, min(CHUNK_BYTES, expected_size + 1))
    _check_limit(rel_path, len(first), max_bytes)
    hasher.update(first)
    following = os.read(fd, CHUNK_BYTES) if first else b""
    if not following:
        # The whole file came in one chunk (most files): one-shot compression is the
        # fastest path and records the content size in the frame.
        return hasher.hexdigest(), len(first), _compressor().compress(first)
    # zstd was promised ``expected_size`` bytes: a file that grows or shrinks while read
    # must end as UnstableWorkingTree, not as a zstd size error.
    _check_size(rel_path, len(first), expected_size)
    stream = _compressor().compressobj(size=expected_size)
    parts = [stream.compress(first)]
    size = len(first)
    chunk = following
    while chunk:
        size += len(chunk)
        _check_limit(rel_path, size, max_bytes)
        _check_size(rel_path, size, expected_size)
        hasher.update(chunk)
        parts.append(stream.compress(chunk))
        chunk = os.read(fd, CHUNK_BYTES)
    if size != expected_size:
        raise UnstableWorkingTree(f"{rel_path}: size changed while capturing")
    parts.append(stream.flush())
    return hasher.hexdigest(), size, b"".join(parts)


def _check_limit(rel_path: str, size: int, max_bytes: int) -> None:
    if size > max_bytes:
        raise LimitExceeded(
            f"{rel_path}: file grew past the {max_bytes}-byte file limit while read"
        )


def _check_size(rel_path: str, size: int, expected_size: int) -> None:
    if size > expected_size:
        raise UnstableWorkingTree(f"{rel_path}: size changed while capturing")
