"""Write a plan's fixtures under scratch and its interventions into the disposable snapshot.

Every component is opened with O_NOFOLLOW from a directory descriptor, so a symlink in
the snapshot (repository-controlled) can never redirect a write outside it.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from ..errors import UnsafePath
from .models import Fixture, Intervention

__all__ = ["apply_interventions", "write_fixtures"]

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_parent(base: Path, rel: str, create: bool) -> tuple[int, str]:
    """Return ``(fd of rel's parent, final name)``, walking components without links."""
    parts = rel.split("/")
    fd = os.open(base, _DIR)
    try:
        for part in parts[:-1]:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
            try:
                child = os.open(part, _DIR, dir_fd=fd)
            except OSError as exc:
                raise UnsafePath(
                    f"{rel}: {part!r} is not a plain directory ({exc.strerror})"
                ) from exc
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd, parts[-1]


def _write(base: Path, rel: str, content: str) -> None:
    parent, name = _open_parent(base, rel, create=True)
    try:
        with contextlib.suppress(FileNotFoundError):
            st = os.stat(name, dir_fd=parent, follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode):
                raise UnsafePath(f"{rel}: exists and is not a regular file")
            os.unlink(name, dir_fd=parent)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(name, flags, 0o644, dir_fd=parent)
        with os.fdopen(fd, "wb") as handle:
            handle.write(content.encode("utf-8"))
    finally:
        os.close(parent)


def write_fixtures(scratch: Path, fixtures: tuple[Fixture, ...]) -> None:
    """Write each fixture under ``scratch``; raises UnsafePath or OSError on failure."""
    for fixture in fixtures:
        _write(scratch, fixture.path, fixture.content)


def apply_interventions(snapshot_dir: Path, interventions: tuple[Intervention, ...]) -> None:
    """Write or delete each intervention file; raises UnsafePath or OSError on failure."""
    for item in interventions:
        if item.delete:
            parent, name = _open_parent(snapshot_dir, item.path, create=False)
            try:
                st = os.stat(name, dir_fd=parent, follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    raise UnsafePath(f"{item.path}: is a directory, not a file")
                os.unlink(name, dir_fd=parent)
            finally:
                os.close(parent)
        else:
            _write(snapshot_dir, item.path, item.content or "")
