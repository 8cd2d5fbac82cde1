"""Where a machine face may capture from (docs/ARCHITECTURE.md, "Faces": capture roots).

``snapshot_capture`` reads a host directory as the service's user (root on a farm worker)
and a probe may then print every byte of it. On the Python API and the CLI the caller is
the local user; on the NDJSON host and the MCP server the caller is a program or a model,
so there a capture root must lie inside a directory the administrator allowed:
``BYTE_PROBE_CAPTURE_ROOTS`` (absolute directories separated by ``os.pathsep``), or by
default the session's own ``--root``. The requested path is resolved (``..`` and links)
before the comparison, and the resolved path is what gets captured.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from ..errors import PolicyError, UnsafePath

__all__ = ["CAPTURE_ROOTS_ENV", "allowed_capture_roots", "confine_capture_root"]

CAPTURE_ROOTS_ENV = "BYTE_PROBE_CAPTURE_ROOTS"


def allowed_capture_roots(
    session_root: Path, environ: Mapping[str, str] | None = None
) -> tuple[str, ...]:
    """The resolved directories a machine face may capture inside.

    Raises PolicyError naming ``BYTE_PROBE_CAPTURE_ROOTS`` and the entry when an entry
    is not an absolute path.
    """
    env = os.environ if environ is None else environ
    raw = env.get(CAPTURE_ROOTS_ENV, "")
    entries = [entry for entry in raw.split(os.pathsep) if entry] or [str(session_root)]
    roots: list[str] = []
    for entry in entries:
        if not os.path.isabs(entry):
            raise PolicyError(f"{CAPTURE_ROOTS_ENV}: {entry!r} is not an absolute path")
        roots.append(os.path.realpath(entry))
    return tuple(roots)


def confine_capture_root(requested: str, roots: tuple[str, ...]) -> Path:
    """The resolved ``requested`` when it lies inside one of ``roots``.

    Raises UnsafePath naming the request, what it resolves to and the setting when it
    lies outside every allowed root.
    """
    resolved = os.path.realpath(requested)
    for root in roots:
        if resolved == root or resolved.startswith(root.rstrip("/") + "/"):
            return Path(resolved)
    raise UnsafePath(
        f"root: {requested!r} (resolved {resolved!r}) is outside the capture roots this "
        f"face allows; the administrator sets them in {CAPTURE_ROOTS_ENV}"
    )
