"""Where a run's mounts are made and how the worker reaches what lies on them.

docs/ARCHITECTURE.md, "Mount namespaces": a run's scratch tmpfs and warm-snapshot overlay
live in its slot's private mount namespace (``namespace.SlotNamespace``), never in the
host's. Code that mounts, unmounts, lists mounts or touches files on those mounts takes a
``Mounts``: the namespace the mounts live in, with ``view`` giving the path through which
the worker process reaches a path *as that namespace sees it*. ``HostMounts`` is the
worker's own namespace (the limits self-check's throwaway tmpfs, tests of the mechanism).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

__all__ = [
    "MNT_DETACH",
    "MS_NODEV",
    "MS_NOSUID",
    "NAMESPACE_REASON",
    "HostMounts",
    "MountEntry",
    "Mounts",
    "parse_mountinfo",
]

#: The ``inconclusive`` reason of a run whose slot namespace cannot be made, checked or
#: entered (docs/ARCHITECTURE.md, "Mount namespaces").
NAMESPACE_REASON = "slot_namespace_failed"
MS_NOSUID, MS_NODEV = 2, 4
MNT_DETACH = 2
#: umount2: never follow a link at the last component of the target.
UMOUNT_NOFOLLOW = 8
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


@dataclass(frozen=True)
class MountEntry:
    """One line of a mountinfo table."""

    mount_id: int
    point: str
    fstype: str
    source: str
    #: The optional fields (``shared:N``, ``master:N``...): propagation of this mount.
    propagation: tuple[str, ...] = ()


def _unescape(text: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as octal.
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)


def parse_mountinfo(text: str) -> list[MountEntry]:
    """Parse ``/proc/PID/mountinfo``; malformed lines are skipped."""
    entries = []
    for line in text.splitlines():
        before, sep, after = line.partition(" - ")
        fields, tail = before.split(" "), after.split(" ")
        if not sep or len(fields) < 6 or not fields[0].isdigit():
            continue
        source = _unescape(tail[1]) if len(tail) > 1 else ""
        entries.append(
            MountEntry(int(fields[0]), _unescape(fields[4]), tail[0], source, tuple(fields[6:]))
        )
    return entries


class Mounts(Protocol):
    """A mount namespace the worker makes mounts in and reaches files through."""

    def mount(self, source: str, target: Path, fstype: str, flags: int, data: str) -> None:
        """mount(2) in this namespace; raises ``OSError`` (``SandboxUnavailable`` when the
        namespace itself is gone)."""

    def unmount(self, target: Path) -> None:
        """Detach the mount at ``target`` in this namespace; raises ``OSError``."""

    def mountinfo(self) -> list[MountEntry]:
        """This namespace's mount table."""

    def view(self, path: Path) -> Path:
        """The path through which this process reaches absolute ``path`` of the namespace."""

    def realpath(self, path: Path) -> Path:
        """``path`` with every link resolved as the namespace sees it; raises ``OSError``."""


class HostMounts:
    """The worker process's own mount namespace."""

    def mount(self, source: str, target: Path, fstype: str, flags: int, data: str) -> None:
        """mount(2) here; raises ``OSError``."""
        args = (source.encode(), str(target).encode(), fstype.encode(), flags, data.encode())
        if _libc.mount(*args) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"mount {fstype} on {target}: {os.strerror(errno)}")

    def unmount(self, target: Path) -> None:
        """Detach the mount at ``target``; raises ``OSError``."""
        if _libc.umount2(str(target).encode(), MNT_DETACH | UMOUNT_NOFOLLOW) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"umount {target}: {os.strerror(errno)}")

    def mountinfo(self) -> list[MountEntry]:
        """This process's mount table."""
        return parse_mountinfo(Path("/proc/self/mountinfo").read_text(encoding="utf-8"))

    def view(self, path: Path) -> Path:
        """``path`` itself."""
        return path

    def realpath(self, path: Path) -> Path:
        """``os.path.realpath``."""
        return Path(os.path.realpath(path))
