"""Scratch as a filesystem: a per-run tmpfs with a byte and an inode limit.

docs/ARCHITECTURE.md, "Limits": a scratch allowance counts only if the kernel
enforces it while the probe runs. A tmpfs mounted by the root worker with
``size=`` and ``nr_inodes=`` stops a write at the byte limit and a ``mkdir`` at
the inode limit during the run, whatever the probe writes or how deep. After
the run, a filesystem with no free block or inode left means the probe hit
the limit, and the run ends ``inconclusive`` with reason ``scratch_limit``.

A run's scratch is mounted in its slot's private mount namespace ("Mount namespaces"):
every function here takes the ``Mounts`` to act in, and the caller reaches the files on
it through ``mounts.view``. Mounts carry the source name ``byte-probe-scratch-<pid>``;
``sweep_stale_scratch`` detaches such mounts of dead worker processes from the worker's
own namespace (the namespaces of a dead worker's slots go with their last process).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from probe_service.errors import SandboxUnavailable
from probe_service.sandbox.mounts import (
    MS_NODEV,
    MS_NOSUID,
    NAMESPACE_REASON,
    HostMounts,
    MountEntry,
    Mounts,
)

__all__ = [
    "DEFAULT_SCRATCH_BYTES",
    "DEFAULT_SCRATCH_INODES",
    "OVERLAY_SOURCE_PREFIX",
    "SOURCE_PREFIX",
    "ScratchLimits",
    "is_scratch_mount",
    "mount_scratch",
    "run_mount_owner",
    "run_scratch",
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


@dataclass(frozen=True)
class ScratchLimits:
    """The byte and inode limits of one run's scratch filesystem."""

    size_bytes: int
    inodes: int


def run_mount_owner(entry: MountEntry) -> int | None:
    """The worker pid named by a scratch or snapshot-overlay mount of ours, else None."""
    prefix = _OURS.get(entry.fstype)
    if prefix is None or not entry.source.startswith(prefix):
        return None
    pid = entry.source[len(prefix) :]
    return int(pid) if pid.isdigit() else None


def is_scratch_mount(path: Path, mounts: Mounts | None = None) -> bool:
    """Return True if ``path`` is the mount point of one of our scratch tmpfs mounts in
    ``mounts`` (the worker's own namespace when None)."""
    seen = mounts or HostMounts()
    real = str(seen.realpath(path))
    found = [e for e in seen.mountinfo() if e.point == real]
    return (
        bool(found) and found[-1].fstype == "tmpfs" and found[-1].source.startswith(SOURCE_PREFIX)
    )


def mount_scratch(
    path: Path, limits: ScratchLimits, *, uid: int = 0, gid: int = 0, mounts: Mounts | None = None
) -> None:
    """Mount a limited tmpfs on the empty directory ``path`` in ``mounts`` (the worker's
    own namespace when None); raises ``SandboxUnavailable``."""
    seen = mounts or HostMounts()
    with os.scandir(seen.view(path)) as entries:
        occupied = any(True for _ in entries)
    if occupied:
        raise SandboxUnavailable(f"scratch {path}: must be empty before its filesystem is mounted")
    # A size of 0 would mean "unlimited" to tmpfs: one page is the smallest real limit.
    size = max(limits.size_bytes, 4096)
    options = f"size={size},nr_inodes={limits.inodes},mode=0700,uid={uid},gid={gid}"
    source = f"{SOURCE_PREFIX}{os.getpid()}"
    try:
        seen.mount(source, path, "tmpfs", MS_NOSUID | MS_NODEV, options)
    except OSError as exc:
        raise SandboxUnavailable(
            f"scratch {path}: cannot mount a {size}-byte tmpfs ({exc.strerror}); "
            "the worker must run as root"
        ) from exc


def unmount_scratch(path: Path, mounts: Mounts | None = None) -> None:
    """Detach the scratch filesystem at ``path`` (its memory is freed with the last user);
    raises ``OSError``."""
    (mounts or HostMounts()).unmount(path)


@contextlib.contextmanager
def scratch_filesystem(
    path: Path, limits: ScratchLimits, mounts: Mounts | None = None
) -> Iterator[Path]:
    """Mount the scratch tmpfs for the duration; always unmount, even on error."""
    mount_scratch(path, limits, mounts=mounts)
    try:
        yield path
    finally:
        unmount_scratch(path, mounts)


def _check_mounted_limits(scratch: Path, wanted: ScratchLimits, mounts: Mounts) -> None:
    """Refuse a caller-mounted scratch filesystem larger than the policy allows."""
    info = os.statvfs(mounts.view(scratch))
    page = os.sysconf("SC_PAGE_SIZE")
    allowed_bytes = -(-max(wanted.size_bytes, page) // page) * page
    if info.f_blocks * info.f_frsize > allowed_bytes or info.f_files > wanted.inodes:
        raise SandboxUnavailable(
            f"scratch {scratch}: mounted with {info.f_blocks * info.f_frsize} bytes and "
            f"{info.f_files} inodes, more than the policy's {wanted.size_bytes} and "
            f"{wanted.inodes}",
            reason="limits_unenforceable",
        )


@contextlib.contextmanager
def run_scratch(scratch: Path, wanted: ScratchLimits, mounts: Mounts) -> Iterator[None]:
    """One run's scratch filesystem in ``mounts`` (the run slot's namespace): the caller's
    when it mounted one there (checked against ``wanted``), else one mounted for the run.

    Raises ``SandboxUnavailable``: ``limits_unenforceable`` for a tmpfs that cannot be
    mounted or is larger than ``wanted``, the namespace's own reason when it is gone,
    ``sandbox_failed`` when scratch cannot be read through the namespace.
    """
    try:
        ours = not is_scratch_mount(scratch, mounts)
        if not ours:
            _check_mounted_limits(scratch, wanted, mounts)
    except OSError as exc:
        raise SandboxUnavailable(f"scratch {scratch}: {exc}", reason="sandbox_failed") from exc
    if ours:
        try:
            mount_scratch(scratch, wanted, mounts=mounts)
        except SandboxUnavailable as exc:
            if exc.reason == NAMESPACE_REASON:
                raise
            raise SandboxUnavailable(str(exc), reason="limits_unenforceable") from exc
    try:
        yield
    finally:
        if ours:
            unmount_scratch(scratch, mounts)


def scratch_exhausted(path: Path) -> str | None:
    """Return which limit the scratch filesystem at ``path`` (a path this process reaches
    it by: a namespace's ``view``) reached ("bytes"/"inodes"), or None."""
    info = os.statvfs(path)
    if info.f_bfree == 0:
        return "bytes"
    if info.f_ffree == 0:
        return "inodes"
    return None


def sweep_stale_scratch() -> int:
    """Detach scratch and snapshot-overlay mounts whose worker process is gone from this
    process's namespace; return how many."""
    host = HostMounts()
    swept = 0
    for entry in host.mountinfo():
        pid = run_mount_owner(entry)
        if pid is not None and not Path(f"/proc/{pid}").exists():
            with contextlib.suppress(OSError):
                host.unmount(Path(entry.point))
                swept += 1
    return swept
