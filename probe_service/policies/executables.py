"""Resolve a policy-approved executable and capture its identity.

docs/ARCHITECTURE.md, "Executables": the executable comes only from an absolute
administrator pin or fixed system directories. Relative, repository-local,
ambient-PATH and non-regular launchers are rejected; an outside-workspace link
is canonicalized before its identity is captured.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from probe_service.errors import PolicyError, UnsafePath
from probe_service.policies.model import Policy

__all__ = [
    "SYSTEM_EXECUTABLE_DIRS",
    "ExecutableChanged",
    "ExecutableIdentity",
    "ExecutableNotAllowed",
    "ExecutableUnresolved",
    "capture_identity",
    "recheck_identity",
    "resolve_executable",
]

#: The only directories searched when the policy has no pin. Never PATH.
SYSTEM_EXECUTABLE_DIRS: tuple[str, ...] = (
    "/usr/local/bin",
    "/usr/bin",
    "/bin",
    "/usr/local/sbin",
    "/usr/sbin",
    "/sbin",
)
_CHUNK = 1024 * 1024


class ExecutableNotAllowed(PolicyError):
    """The plan names an executable the policy does not allow."""

    code = "executable_not_allowed"


class ExecutableUnresolved(UnsafePath):
    """The executable could not be resolved to a safe regular executable file."""

    code = "executable_unresolved"


class ExecutableChanged(UnsafePath):
    """The executable's identity changed between resolution and launch."""

    code = "executable_changed"


class ExecutableIdentity(BaseModel):
    """What a receipt records about the launched file: stat identity plus content digest."""

    model_config = ConfigDict(frozen=True)

    path: str
    st_dev: int
    st_ino: int
    st_size: int
    st_mtime_ns: int
    st_ctime_ns: int
    st_mode: int
    st_uid: int
    sha256: str


def _is_within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _candidate(policy: Policy, name: str) -> Path:
    pinned = policy.executable_pins.get(name)
    if pinned is not None:
        return Path(pinned)
    for directory in SYSTEM_EXECUTABLE_DIRS:
        candidate = Path(directory) / name
        if os.path.lexists(candidate):
            return candidate
    raise ExecutableUnresolved(f"{name!r} is in no fixed system directory and has no pin")


def resolve_executable(policy: Policy, name: str, forbidden_roots: Sequence[Path] = ()) -> Path:
    """Return the canonical path of allowlisted ``name``.

    Raises ``ExecutableNotAllowed`` if the policy does not list it, and
    ``ExecutableUnresolved`` if it is relative, missing, inside a forbidden root
    (workspace, snapshot, scratch), non-regular or not executable.
    """
    if name not in policy.allowed_executables:
        raise ExecutableNotAllowed(f"executable {name!r} is not allowed by policy {policy.id!r}")
    candidate = _candidate(policy, name)
    roots = [Path(os.path.realpath(root)) for root in forbidden_roots]
    # Both the link and its target must stay out of the workspace: a link inside
    # it is repository-controlled even if it points at /usr/bin.
    if any(_is_within(Path(os.path.abspath(candidate)), root) for root in roots):
        raise ExecutableUnresolved(f"{candidate} lies inside a forbidden root")
    resolved = Path(os.path.realpath(candidate))
    if any(_is_within(resolved, root) for root in roots):
        raise ExecutableUnresolved(f"{candidate} resolves to {resolved}, inside a forbidden root")
    try:
        info = os.stat(resolved)
    except OSError as exc:
        raise ExecutableUnresolved(f"{resolved}: {exc.strerror}") from exc
    if not stat.S_ISREG(info.st_mode):
        raise ExecutableUnresolved(f"{resolved} is not a regular file")
    if not info.st_mode & 0o111 or "=" in str(resolved):
        raise ExecutableUnresolved(f"{resolved} is not an executable file")
    return resolved


def capture_identity(path: Path) -> ExecutableIdentity:
    """Stat and stream-hash ``path`` (not following links); raises ``ExecutableUnresolved``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise ExecutableUnresolved(f"{path}: {exc.strerror}") from exc
    with os.fdopen(fd, "rb") as handle:
        before = os.fstat(handle.fileno())
        if not stat.S_ISREG(before.st_mode):
            raise ExecutableUnresolved(f"{path} is not a regular file")
        digest = hashlib.sha256()
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return ExecutableIdentity(
        path=str(path),
        st_dev=before.st_dev,
        st_ino=before.st_ino,
        st_size=before.st_size,
        st_mtime_ns=before.st_mtime_ns,
        st_ctime_ns=before.st_ctime_ns,
        st_mode=before.st_mode,
        st_uid=before.st_uid,
        sha256=digest.hexdigest(),
    )


def recheck_identity(identity: ExecutableIdentity) -> None:
    """Compare the file's current stat identity with ``identity``; raises ``ExecutableChanged``."""
    try:
        now = os.lstat(identity.path)
    except OSError as exc:
        raise ExecutableChanged(f"{identity.path}: {exc.strerror}") from exc
    current = (
        now.st_dev,
        now.st_ino,
        now.st_size,
        now.st_mtime_ns,
        now.st_ctime_ns,
        now.st_mode,
        now.st_uid,
    )
    recorded = (
        identity.st_dev,
        identity.st_ino,
        identity.st_size,
        identity.st_mtime_ns,
        identity.st_ctime_ns,
        identity.st_mode,
        identity.st_uid,
    )
    if current != recorded:
        raise ExecutableChanged(f"{identity.path} changed after its identity was captured")
