"""Validation of repository-relative paths carried in manifests, plans and claims."""

from __future__ import annotations

from .errors import UnsafePath

__all__ = ["MAX_PATH_BYTES", "MAX_PATH_DEPTH", "check_relative_path"]

#: Most components a relative path may have. Deeper trees are refused, not walked:
#: every host-side walk stays bounded (docs/ARCHITECTURE.md, "Host-side walks").
MAX_PATH_DEPTH = 256
#: Most UTF-8 bytes a relative path may have, so a root of up to 1 KiB plus the path
#: stays under Linux's PATH_MAX (4096) wherever the host opens it by name.
MAX_PATH_BYTES = 3072
#: Characters of an over-long path shown in a refusal (the message stays one line).
_SHOWN_CHARS = 120


def check_relative_path(path: str, *, field: str = "path") -> str:
    """Return ``path`` if it is a clean relative POSIX path; raise UnsafePath otherwise.

    Refuses empty paths, absolute paths, ``.``/``..``/empty components, NUL bytes,
    backslashes (which another platform would read as a separator), and paths deeper
    than ``MAX_PATH_DEPTH`` components or longer than ``MAX_PATH_BYTES`` bytes.
    """
    if not path:
        raise UnsafePath(f"{field}: empty path")
    if "\x00" in path:
        raise UnsafePath(f"{field}: {_shown(path)} contains a NUL byte")
    if "\\" in path:
        raise UnsafePath(f"{field}: {_shown(path)} contains a backslash")
    if path.startswith("/"):
        raise UnsafePath(f"{field}: {_shown(path)} is absolute")
    parts = path.split("/")
    if "" in parts or "." in parts or ".." in parts:
        raise UnsafePath(f"{field}: {_shown(path)} has an empty, '.' or '..' component")
    if len(parts) > MAX_PATH_DEPTH:
        raise UnsafePath(
            f"{field}: {_shown(path)} is {len(parts)} components deep, "
            f"over the limit of {MAX_PATH_DEPTH}"
        )
    size = len(path.encode("utf-8", "surrogatepass"))
    if size > MAX_PATH_BYTES:
        raise UnsafePath(
            f"{field}: {_shown(path)} is {size} bytes long, over the limit of {MAX_PATH_BYTES}"
        )
    return path


def _shown(path: str) -> str:
    """``repr(path)``, shortened in the middle when it is long."""
    if len(path) <= _SHOWN_CHARS:
        return repr(path)
    half = _SHOWN_CHARS // 2
    return f"{path[:half]!r}...{path[-half:]!r}"
