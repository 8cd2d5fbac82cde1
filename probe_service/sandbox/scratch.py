"""Scratch as a filesystem: a per-run tmpfs with a byte and an inode limit.

docs/ARCHITECTURE.md, "Limits": a scratch allowance counts only if the kernel
enforces it while the probe runs. A tmpfs mounted by the root worker with
``size=`` and ``nr_inodes=`` stops a write at the byte limit and a ``mkdir`` at
the inode limit during the run, whatever the probe writes or how deep. After
the run, a filesystem with no free block or inode left means the probe hit
the limit, and the run ends ``inconclusive`` with reason ``scratch_limit``.

Mounts carry the source name ``byte-probe-scratch-<pid>`` so that a worker can
sweep the mounts a dead worker process left behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from probe_service.errors import SandboxUnavailable

__all__ = [
    "DEFAULT_SCRATCH_BYTES",
    "DEFAULT_SCRATCH_INODES",
    "OVERLAY_SOURCE_PREFIX",
    "SOURCE_PREFIX",
    "ScratchLimits",
    "is_scratch_mount",
    "mount_scratch",
    "scratch_exhausted",
    "scratch_filesystem",
    "sweep_stale_scratch",
    "unmount_scratch",
]

#: Applied when a policy sets no ``scratch_bytes``.
DEFAULT_SCRATCH_BYTES = 256 * 1024 * 1024
#: Applied when a policy sets no ``scratch_inodes``.
DEFAULT_SCRATCH_INODES = 16_384
SOURCE_PREFIX = "byte-probe-scratch-"
#: Source name of a run's warm-snapshot overlay (docs/ARCHITECTURE.md, "Warm snapshots").
OVERLAY_SOURCE_PREFIX = "byte-probe-snapshot-"
_OURS = {"tmpfs": SOURCE_PREFIX, "overlay": OVERLAY_SOURCE_PREFIX}
_MS_NOSUID, _MS_NODEV = 2, 4
_MNT_DETACH = 2
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


@dataclass(frozen=True)
class ScratchLimits:
    """The byte and inode limits of one run's scratch filesystem."""

    size_bytes: int
    inodes: int


def _mountinfo() -> list[tuple[str, str, str]]:
    """Return (mount point, fs type, source) for every mount of this process."""
    entries = []
    for line in Path("/proc/self/mountinfo").read_text(encoding="utf-8").splitlines():
        before, _, after = line.partition(" - ")
        point = before.split(" ")[4]
        fields = after.split(" ")
        # mountinfo escapes space, tab, newline and backslash as octal.
        decoded = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), point)
        entries.append((decoded, fields[0], fields[1] if len(fields) > 1 else ""))
    return entries


def is_scratch_mount(path: Path) -> bool:
    """Return True if ``path`` is the mount point of one of our scratch tmpfs mounts."""
    real = os.path.realpath(path)
    found = [e for e in _mountinfo() if e[0] == real]
    return bool(found) and found[-1][1] == "tmpfs" and found[-1][2].startswith(SOURCE_PREFIX)


def mount_scratch(path: Path, limits: ScratchLimits, *, uid: int = 0, gid: int = 0) -> None:
    """Mount a limited tmpfs on the empty directory ``path``; raises ``SandboxUnavailable``."""
    with os.scandir(path) as entries:
        occupied = any(True for _ in entries)
    if occupied:
        raise SandboxUnavailable(f"scratch {path}: must be empty before its filesystem is mounted")
    # A size of 0 would mean "unlimited" to tmpfs: one page is the smallest real limit.
    size = max(limits.size_bytes, 4096)
    options = f"size={size},nr_inodes={limits.inodes},mode=0700,uid={uid},gid={gid}"
    source = f"{SOURCE_PREFIX}{os.getpid()}".encode()
    result = _libc.mount(
        source, str(path).encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, options.encode()
    )
    if result != 0:
        errno = ctypes.get_errno()
        raise SandboxUnavailable(
            f"scratch {path}: cannot mount a {size}-byte tmpfs ({os.strerror(errno)}); "
            "the worker must run as root"
        )


def unmount_scratch(path: Path) -> None:
    """Detach the scratch filesystem at ``path`` (its memory is freed with the last user)."""
    if _libc.umount2(str(path).encode(), _MNT_DETACH) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"umount {path}: {os.strerror(errno)}")


@contextlib.contextmanager
def scratch_filesystem(path: Path, limits: ScratchLimits) -> Iterator[Path]:
    """Mount the scratch tmpfs for the duration; always unmount, even on error."""
    mount_scratch(path, limits)
    try:
        yield path
    finally:
        unmount_scratch(path)


def scratch_exhausted(path: Path) -> str | None:
    """Return which limit the scratch filesystem reached ("bytes"/"inodes"), or None."""
    info = os.statvfs(path)
    if info.f_bfree == 0:
        return "bytes"
    if info.f_ffree == 0:
        return "inodes"
    return None


def sweep_stale_scratch() -> int:
    """Detach scratch and snapshot-overlay mounts whose worker process is gone; return how
    many."""
    swept = 0
    for point, fstype, source in _mountinfo():
        prefix = _OURS.get(fstype)
        if prefix is None or not source.startswith(prefix):
            continue
        pid = source[len(prefix) :]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            with contextlib.suppress(OSError):
                unmount_scratch(Path(point))
                swept += 1
    return swept
