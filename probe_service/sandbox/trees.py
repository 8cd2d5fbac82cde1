"""Iterative removal of probe- and repository-shaped trees.

docs/ARCHITECTURE.md, "Host-side walks": a probe can leave a directory chain
thousands deep, read-only directories and links anywhere; the host side never
recurses over such a tree and never follows a link in it.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

__all__ = ["remove_tree"]


def remove_tree(root: Path) -> None:
    """Remove ``root`` and everything below it without recursion; missing is fine."""
    try:
        info = os.lstat(root)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):
        os.unlink(root)
        return
    pending: list[tuple[str, bool]] = [(str(root), False)]
    while pending:
        path, emptied = pending.pop()
        if emptied:
            with contextlib.suppress(FileNotFoundError):
                os.rmdir(path)
            continue
        with contextlib.suppress(OSError):
            os.chmod(path, stat.S_IRWXU)  # a probe may leave its directories read-only
        pending.append((path, True))
        with os.scandir(path) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    pending.append((entry.path, False))
                else:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(entry.path)
