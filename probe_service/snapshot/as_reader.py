"""Capturing on another user's behalf: the check that the caller may read every path.

docs/ARCHITECTURE.md, "Local service": ``byte-probe serve`` runs as root and captures the
trees its callers name, so a capture must hold only what the caller could have read
itself. After the capture's first scan, a forked child drops to the caller's uid, gid and
groups and opens, with the kernel's own permission checks (ACLs included), the root and
every scanned file beneath it following no link (each directory opened once, for
reading), and the directory of every link; each
file it opens must be the very inode the scan saw (``stat_key``), and the capture's own
reads compare the same key, so the file checked is the file read. A refusal names the
first path the caller may not read.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from ..errors import UnsafePath, UnstableWorkingTree
from .reader import FileStat, open_dir_beneath, stat_key

__all__ = ["ReadCheck", "Reader", "check_readable"]

#: ``check(abs_root, file stats by path, link paths)``; raises when the caller may not read.
ReadCheck = Callable[[str, Mapping[str, FileStat], Iterable[str]], None]

_ROOT_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# As the capture's reads: no link followed, and a FIFO swapped in never blocks the open.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
#: The child's verdicts (its exit codes).
_READABLE, _UNREADABLE, _MOVED, _NO_IDENTITY = 0, 1, 2, 3
#: Most bytes of the child's report read (one path and a reason).
_REPORT_BYTES = 8192


@dataclass(frozen=True)
class Reader:
    """Whom a capture reads for: the caller's uid, primary gid and supplementary groups."""

    uid: int
    gid: int
    groups: tuple[int, ...] = ()

    def check(self, abs_root: str, stats: Mapping[str, FileStat], links: Iterable[str]) -> None:
        """``check_readable`` as this reader (a ``ReadCheck``)."""
        check_readable(self, abs_root, stats, links)


def check_readable(
    reader: Reader, abs_root: str, stats: Mapping[str, FileStat], links: Iterable[str]
) -> None:
    """Check, as ``reader`` in a forked child, that ``abs_root`` and every path of
    ``stats`` (and the directory of every link) can be opened for reading.

    Raises UnsafePath naming the first path the reader may not read (or an identity the
    service cannot take: a non-root service reading for another uid), UnstableWorkingTree
    when a file opened is not the one scanned (the capture retries).
    """
    paths = list(stats.items())
    link_dirs = sorted({link.rpartition("/")[0] for link in links})
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: only system calls, then _exit (threads are not copied)
        code = _NO_IDENTITY
        try:
            os.close(read_end)
            code, report = _check_as(reader, abs_root, paths, link_dirs)
            os.write(write_end, report.encode("utf-8", "surrogateescape")[:_REPORT_BYTES])
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        report = pipe.read(_REPORT_BYTES).decode("utf-8", "replace")
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code == _READABLE:
        return
    who = f"uid {reader.uid}"
    if code == _MOVED:
        raise UnstableWorkingTree(f"{report}: changed while checking what {who} may read")
    if code == _UNREADABLE:
        path, _, why = report.partition("\0")
        raise UnsafePath(
            f"root: {abs_root!r}: {path!r} is not readable by {who} ({why}); the local "
            "service captures only what its caller may read"
        )
    raise UnsafePath(f"root: {abs_root!r}: cannot read as {who} ({report or f'exit {code}'})")


def _check_as(
    reader: Reader, abs_root: str, paths: list[tuple[str, FileStat]], link_dirs: list[str]
) -> tuple[int, str]:
    try:
        os.setgroups(list(reader.groups))
        os.setgid(reader.gid)
        os.setuid(reader.uid)
    except OSError as exc:
        return _NO_IDENTITY, exc.strerror or str(exc)
    try:
        root_fd = os.open(abs_root, _ROOT_FLAGS)
    except OSError as exc:
        return _UNREADABLE, f"{abs_root}\0{exc.strerror}"
    by_dir: dict[str, list[tuple[str, FileStat]]] = {rel_dir: [] for rel_dir in link_dirs}
    for rel, expected in paths:
        by_dir.setdefault(rel.rpartition("/")[0], []).append((rel, expected))
    # Each directory is opened once, beneath the root and following no link (reading it
    # as the caller: its names are the caller's to list), and its files beneath it.
    for rel_dir, files in by_dir.items():
        try:
            dir_fd = open_dir_beneath(root_fd, rel_dir)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
                return _MOVED, rel_dir
            return _UNREADABLE, f"{rel_dir or '.'}\0{exc.strerror}"
        try:
            verdict = _check_files(dir_fd, files)
        finally:
            os.close(dir_fd)
        if verdict is not None:
            return verdict
    return _READABLE, ""


def _check_files(dir_fd: int, files: list[tuple[str, FileStat]]) -> tuple[int, str] | None:
    """The first file of ``files`` (all in ``dir_fd``) the caller may not open, or that is
    not the inode scanned; None when every one is fine."""
    for rel, expected in files:
        try:
            fd = os.open(rel.rpartition("/")[2], _FILE_FLAGS, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
                return _MOVED, rel
            return _UNREADABLE, f"{rel}\0{exc.strerror}"
        try:
            if stat_key(os.fstat(fd)) != expected:
                return _MOVED, rel
        finally:
            os.close(fd)
    return None
