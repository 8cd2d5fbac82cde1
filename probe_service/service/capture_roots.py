"""Where a machine face may capture from (docs/ARCHITECTURE.md, "Faces": capture roots).

``snapshot_capture`` reads a host directory as the service's user (root on a farm worker)
and a probe may then print every byte of it. On the Python API and the CLI the caller is
the local user; on the NDJSON host and the MCP server the caller is a program or a model,
so there a capture root must lie inside a directory the administrator allowed:
``BYTE_PROBE_CAPTURE_ROOTS`` (absolute directories separated by ``os.pathsep``), or by
default the session's own ``--root``. The requested path is resolved (``..`` and links)
before the comparison, and the resolved path is what gets captured. Inside an allowed
root, a ``.zyte`` directory (the store, the default policy file and signing key) is never
a capture root, nor is a directory whose capture would include the configured signing
key or policy file (a capture skips ``.zyte`` and the other skipped directories below
its root, so a key kept there is safe), nor one that is or holds the service user's
home directory (SSH keys, ``.pgpass``).
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import UnsafePath
from ..settings import CAPTURE_ROOTS_ENV
from ..store.safety import STATE_DIRNAME

__all__ = [
    "CAPTURE_ROOTS_ENV",
    "allowed_capture_roots",
    "confine_capture_root",
    "git_confinement_roots",
]


def allowed_capture_roots(
    configured: tuple[str, ...], session_root: Path | None
) -> tuple[str, ...]:
    """The resolved directories a machine face may capture inside: the ``configured``
    ones (the settings' ``capture_roots``, absolute: ``read_settings`` refuses a relative
    entry naming ``BYTE_PROBE_CAPTURE_ROOTS``), else ``session_root`` (none without one:
    every capture is refused)."""
    entries = list(configured)
    if not entries and session_root is not None:
        entries = [os.path.abspath(session_root)]
    return tuple(os.path.realpath(entry) for entry in entries)


#: Allowed roots a refusal lists (the setting may hold many).
_LISTED = 10


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _captured_by(secret: str, root: str) -> bool:
    """Whether capturing ``root`` would read ``secret`` (not below a skipped directory)."""
    if not _within(secret, root) or secret == root:
        return False
    from ..snapshot.enumerate import SKIPPED_DIRS  # only a machine face's capture needs it

    return not any(part in SKIPPED_DIRS for part in os.path.relpath(secret, root).split("/")[:-1])


def confine_capture_root(
    requested: str,
    roots: tuple[str, ...],
    protected: tuple[Path, ...],
    home: Path,
    base: Path | None = None,
) -> Path:
    """The resolved ``requested`` when it lies inside one of ``roots`` and its capture
    would read none of the ``protected`` files (the signing key, the policy file). A
    relative ``requested`` is taken from ``base`` (the face's ``--root``), never from the
    server process's working directory.

    Raises UnsafePath naming the request, what it resolves to and the rule: a NUL byte,
    outside every allowed root (naming the setting), inside a ``.zyte`` directory,
    holding a protected file, or holding the service user's home directory (``home``, the
    settings' ``home``).
    """
    if "\0" in requested:
        raise UnsafePath(f"root: {requested!r} holds a NUL byte")
    anchored = os.path.join(base, requested) if base is not None else requested
    resolved = os.path.realpath(anchored)
    where = f"root: {requested!r} (resolved {resolved!r})"
    if not any(_within(resolved, root) for root in roots):
        allowed = ", ".join(repr(root) for root in roots[:_LISTED]) or "none"
        more = f" and {len(roots) - _LISTED} more" if len(roots) > _LISTED else ""
        raise UnsafePath(
            f"{where} is outside the capture roots this face allows ({allowed}{more}); "
            f"the administrator sets them in {CAPTURE_ROOTS_ENV}"
        )
    if STATE_DIRNAME in resolved.split("/"):
        raise UnsafePath(f"{where} is inside a {STATE_DIRNAME} state directory")
    if any(_captured_by(os.path.realpath(path), resolved) for path in protected):
        raise UnsafePath(f"{where} holds the service's signing key or policy file")
    # SSH keys, .pgpass, cloud credentials: a project inside the home may be captured,
    # the home itself (or a directory holding it, such as /) may not.
    real_home = os.path.realpath(home)
    if _within(real_home, resolved):
        raise UnsafePath(f"{where} holds the service user's home directory ({real_home})")
    return Path(resolved)


def git_confinement_roots(
    repository: Path, confined: tuple[str, ...] | None, configured: tuple[str, ...]
) -> tuple[str, ...]:
    """Where git may read for a capture from git objects of ``repository`` (already
    checked by ``confine_capture_root`` on a machine face): the face's capture roots
    there; on the Python API and the CLI the configured ``BYTE_PROBE_CAPTURE_ROOTS``, or
    else the repository's own directory (docs/ARCHITECTURE.md, "Snapshots from git")."""
    if confined is not None:
        return confined
    if configured:
        return allowed_capture_roots(configured, None)
    return (os.path.realpath(repository),)
