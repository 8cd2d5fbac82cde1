"""Validation of repository-relative paths carried in manifests, plans and claims."""

from __future__ import annotations

from .errors import UnsafePath

__all__ = ["check_relative_path"]


def check_relative_path(path: str, *, field: str = "path") -> str:
    """Return ``path`` if it is a clean relative POSIX path; raise UnsafePath otherwise.

    Refuses empty paths, absolute paths, ``.``/``..``/empty components, NUL bytes and
    backslashes (which another platform would read as a separator).
    """
    if not path:
        raise UnsafePath(f"{field}: empty path")
    if "\x00" in path:
        raise UnsafePath(f"{field}: {path!r} contains a NUL byte")
    if "\\" in path:
        raise UnsafePath(f"{field}: {path!r} contains a backslash")
    if path.startswith("/"):
        raise UnsafePath(f"{field}: {path!r} is absolute")
    for part in path.split("/"):
        if part in ("", ".", ".."):
            raise UnsafePath(f"{field}: {path!r} has an empty, '.' or '..' component")
    return path
