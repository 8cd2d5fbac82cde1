"""Path-safety checks that must pass before the embedded store is opened.

Seed 000 ("Durable data"): reject a linked or escaping ``.zyte`` directory and
non-regular, symlinked or hard-linked database, WAL, SHM and journal paths, and never
touch the repository's own ``.gitignore``.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import UnsafePath
from ..fstree import make_directory

__all__ = ["DB_FILENAME", "STATE_DIRNAME", "check_database_files", "prepare_state_dir"]

STATE_DIRNAME = ".zyte"
DB_FILENAME = "repository-intelligence.sqlite3"
_SIDECAR_SUFFIXES = ("", "-wal", "-shm", "-journal")


def prepare_state_dir(root: Path) -> Path:
    """Create or validate ``<root>/.zyte`` and its deny-all ``.gitignore``; return its path.

    Raises UnsafePath when the root is not a directory, or ``.zyte`` is a link, not a
    directory, or resolves outside the root.
    """
    try:
        root_stat = root.stat()
    except OSError as exc:
        raise UnsafePath(f"{root}: repository root cannot be read ({exc.strerror})") from exc
    if not stat.S_ISDIR(root_stat.st_mode):
        raise UnsafePath(f"{root}: repository root is not a directory")
    state = root / STATE_DIRNAME
    make_directory(state, 0o700, "state directory")
    st = os.lstat(state)
    if stat.S_ISLNK(st.st_mode):
        raise UnsafePath(f"{state}: state directory is a symbolic link")
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafePath(f"{state}: state directory is not a directory")
    real_root = os.path.realpath(root)
    if os.path.dirname(os.path.realpath(state)) != real_root:
        raise UnsafePath(f"{state}: state directory resolves outside {real_root}")
    _write_deny_all_gitignore(state)
    return state


def _write_deny_all_gitignore(state: Path) -> None:
    """Write ``.zyte/.gitignore`` = ``*`` unless a regular one is there; refuse a link."""
    path = state / ".gitignore"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    try:
        fd = os.open(path, flags, 0o644)
    except FileExistsError:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
            raise UnsafePath(f"{path}: not a regular, singly-linked file") from None
        return
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write("*\n")


def check_database_files(db_path: Path) -> None:
    """Refuse a database, ``-wal``, ``-shm`` or ``-journal`` path that is unsafe to open.

    Raises UnsafePath naming the path when it is a symbolic link, not a regular file,
    or has more than one hard link.
    """
    for suffix in _SIDECAR_SUFFIXES:
        path = Path(f"{db_path}{suffix}")
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(st.st_mode):
            raise UnsafePath(f"{path}: store file is a symbolic link")
        if not stat.S_ISREG(st.st_mode):
            raise UnsafePath(f"{path}: store file is not a regular file")
        if st.st_nlink > 1:
            raise UnsafePath(f"{path}: store file has {st.st_nlink} hard links (limit 1)")
