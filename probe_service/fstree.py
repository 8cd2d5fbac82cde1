"""Iterative, link-safe removal of trees a probe or a repository shaped.

docs/ARCHITECTURE.md, "Host-side walks": a probe can leave a directory chain thousands
of levels deep, read-only directories and links to anywhere, and the worker must still
remove what it left. So nothing here recurses (the call
stack stays flat whatever the depth), every directory is opened relative to its parent
with ``O_NOFOLLOW`` (no path grows towards ``PATH_MAX`` and no link is ever followed),
at most two directory descriptors are open at once, and the walk never leaves the
device of its root (a mount point is left alone, never emptied).
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .errors import UnsafePath

__all__ = ["discard_tree", "make_directory", "remove_tree"]

log = logging.getLogger(__name__)

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_PATH_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_OWNER_RWX = stat.S_IRWXU

#: Called with a directory's descriptor and its entries that are not directories.
_Visit = Callable[[int, list[os.DirEntry[str]]], None]
#: Called with the parent's descriptor and the name of a directory just finished.
_Leave = Callable[[int, str], None]


@dataclass
class _Level:
    """One directory on the walk's current path (kept as data, not as a stack frame)."""

    name: str
    identity: tuple[int, int]
    pending: list[str] = field(default_factory=list)


def remove_tree(path: Path) -> None:
    """Remove ``path`` and everything under it without following a link.

    Directories the probe left read-only (or unreadable) are made owner-writable first;
    a link is removed, never its target. A missing ``path`` is not an error.
    Raises OSError when something cannot be removed (e.g. a mount point inside it).
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(path)
        return

    def unlink_all(fd: int, entries: list[os.DirEntry[str]]) -> None:
        for entry in entries:
            try:
                os.unlink(entry.name, dir_fd=fd)
            except FileNotFoundError:
                continue

    def rmdir(parent_fd: int, name: str) -> None:
        os.rmdir(name, dir_fd=parent_fd)

    _walk(path, unlink_all, rmdir)
    os.rmdir(path)


def discard_tree(path: Path) -> bool:
    """Remove ``path`` like ``remove_tree``; log instead of raising. Return whether it is gone.

    For ``finally`` blocks: a failed removal must never replace the run's receipt.
    """
    try:
        remove_tree(path)
    except OSError as exc:
        log.error("could not remove %s: %s", path, exc)
        return False
    return True


def _walk(root: Path, visit: _Visit, leave: _Leave) -> None:
    """Post-order walk under ``root``: ``visit`` each directory's other entries, then
    ``leave`` each subdirectory once everything under it was visited."""
    fd = os.open(root, _DIR_FLAGS)
    try:
        device = os.fstat(fd).st_dev
        path = [_enter(fd, "", visit)]
        while path:
            top = path[-1]
            if top.pending:
                name = top.pending.pop()
                child = _open_child(fd, name, device)
                if child is not None:
                    os.close(fd)
                    fd = child
                    path.append(_enter(fd, name, visit))
                continue
            path.pop()
            if path:
                parent = _open_parent(fd, path[-1].identity)
                os.close(fd)
                fd = parent
                leave(fd, top.name)
    finally:
        os.close(fd)


def _enter(fd: int, name: str, visit: _Visit) -> _Level:
    st = os.fstat(fd)
    if st.st_mode & _OWNER_RWX != _OWNER_RWX:
        os.fchmod(fd, stat.S_IMODE(st.st_mode) | _OWNER_RWX)
    subdirs: list[str] = []
    others: list[os.DirEntry[str]] = []
    with os.scandir(fd) as entries:
        for entry in entries:
            if _is_dir(entry):
                subdirs.append(entry.name)
            else:
                others.append(entry)
    visit(fd, others)
    return _Level(name, (st.st_dev, st.st_ino), subdirs)


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def _open_child(fd: int, name: str, device: int) -> int | None:
    """Open subdirectory ``name`` of ``fd``; None when it vanished or cannot be entered."""
    try:
        child = os.open(name, _DIR_FLAGS, dir_fd=fd)
    except PermissionError:
        _make_enterable(fd, name)
        child = os.open(name, _DIR_FLAGS, dir_fd=fd)
    except FileNotFoundError:
        return None
    if os.fstat(child).st_dev != device:
        os.close(child)  # a mount point: never empty another filesystem
        return None
    return child


def _make_enterable(fd: int, name: str) -> None:
    """chmod u+rwx the directory ``name`` itself: through an O_PATH descriptor, never a link."""
    handle = os.open(name, _PATH_FLAGS, dir_fd=fd)
    try:
        os.chmod(f"/proc/self/fd/{handle}", _OWNER_RWX)
    finally:
        os.close(handle)


def _open_parent(fd: int, expected: tuple[int, int]) -> int:
    """Open ``..`` of ``fd``; raise OSError if it is not the directory the walk came from."""
    parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
    st = os.fstat(parent)
    if (st.st_dev, st.st_ino) != expected:
        os.close(parent)
        raise OSError(errno.ESTALE, "a directory moved while its tree was walked")
    return parent


def make_directory(path: Path, mode: int, what: str) -> None:
    """Create the directory ``path`` with ``mode`` unless something is already there (the
    caller checks what it is, without following links); raises UnsafePath naming ``what``."""
    try:
        os.mkdir(path, mode)
    except FileExistsError:
        pass
    except OSError as exc:
        raise UnsafePath(f"{path}: cannot create {what} ({exc.strerror})") from exc
