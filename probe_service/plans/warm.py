"""Warm snapshots: a per-worker cache of materialized trees, laid under each run.

docs/ARCHITECTURE.md, "Warm snapshots": each worker process keeps the snapshots it
materialized in a private directory (root-owned, 0700), bounded by bytes with LRU
eviction. A run's disposable tree is an overlay mount, made in the run slot's private
mount namespace ("Mount namespaces"), whose lower layer is the cached
tree and whose upper layer is new and the run's own, so interventions (which unlink and
create, ``plans.overlay``) land in that run's upper layer and never touch a cached inode.
Where an overlay cannot be mounted (not root, no overlayfs) the tree is a fresh directory
tree of hard links to the cached files instead: root-owned 0644/0755 files that no probe
uid can write, mounted read-only in the sandbox besides.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import tempfile
import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from ..errors import SandboxUnavailable, UnsafePath
from ..fstree import discard_tree
from ..rundirs import RUN_DIR_PREFIX
from ..sandbox.mounts import HostMounts, Mounts
from ..sandbox.scratch import OVERLAY_SOURCE_PREFIX
from ..snapshot import Snapshot, snapshot_materialize
from ..store import Store

log = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_CACHE_BYTES",
    "SnapshotCache",
    "close_default_snapshot_cache",
    "default_snapshot_cache",
    "link_tree",
]

#: The default bound of one worker's cache (file bytes of the cached trees).
DEFAULT_CACHE_BYTES = 512 << 20


def _mount_overlay(lower: Path, dest: Path, mounts: Mounts) -> bool:
    """Mount ``lower`` read-only under a new upper layer at ``dest``, in ``mounts`` (the
    run's slot namespace); False if impossible. Raises ``SandboxUnavailable`` when the
    namespace itself is gone."""
    upper, work = dest.parent / f".{dest.name}-upper", dest.parent / f".{dest.name}-work"
    for path in (lower, upper, work):
        if any(c in str(path) for c in ",:\\"):  # would split the option string
            return False
    for path in (dest, upper, work):
        os.mkdir(path, 0o755)
    options = f"lowerdir={lower},upperdir={upper},workdir={work}"
    try:
        mounts.mount(f"{OVERLAY_SOURCE_PREFIX}{os.getpid()}", dest, "overlay", 0, options)
    except OSError:
        for path in (dest, upper, work):
            os.rmdir(path)
        return False
    return True


@dataclass(frozen=True)
class _Cached:
    path: Path
    snapshot: Snapshot
    size: int


#: Where a root worker keeps its cache: fixed, so a temp-dir change never strands it.
CACHE_BASE = Path("/var/lib/byte-probe/snapshots")


def _cache_base() -> Path:
    """The directory holding every worker's cache; dead workers' caches are removed."""
    if os.geteuid() != 0:
        return Path(tempfile.gettempdir())
    CACHE_BASE.mkdir(mode=0o700, parents=True, exist_ok=True)
    for entry in CACHE_BASE.iterdir():
        pid = entry.name.partition("-")[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            discard_tree(entry)
    return CACHE_BASE


def link_tree(source: Path, dest: Path) -> None:
    """Recreate ``source`` under the new directory ``dest``: new directories, hard links to
    its files, copies of its links. Iterative; never follows a link. Raises ``OSError``."""
    os.mkdir(dest, 0o755)
    pending = [(source, dest)]
    while pending:
        src_dir, dst_dir = pending.pop()
        with os.scandir(src_dir) as entries:
            for entry in entries:
                target = dst_dir / entry.name
                if entry.is_symlink():
                    os.symlink(os.readlink(entry.path), target)
                elif entry.is_dir(follow_symlinks=False):
                    os.mkdir(target, 0o755)
                    pending.append((Path(entry.path), target))
                else:
                    os.link(entry.path, target, follow_symlinks=False)


class SnapshotCache:
    """One worker's warm snapshots, keyed by store and snapshot id, bounded by bytes."""

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES, root: Path | None = None) -> None:
        # Named by the worker's pid, so a later worker removes a dead one's cache
        # (docs/ARCHITECTURE.md, "Host-side walks").
        if root is None:
            base = _cache_base()
            prefix = f"{os.getpid()}-" if base == CACHE_BASE else f"{RUN_DIR_PREFIX}{os.getpid()}-"
            root = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
        self.root = root
        self.root.mkdir(mode=0o700, exist_ok=True)
        self.root.chmod(0o700)
        self.max_bytes = max_bytes
        #: Overlay mounts when possible (root with overlayfs), else hard-linked trees.
        self.use_overlay = os.geteuid() == 0
        self._entries: OrderedDict[tuple[str, str], _Cached] = OrderedDict()
        self._lock = threading.Lock()
        # Which cached tree each run's tree lies on, and trees evicted while in use: a
        # mounted lower layer is removed only once its last run released it.
        self._in_use: dict[Path, Path] = {}
        self._evicted: set[Path] = set()
        #: The namespace each run's overlay is mounted in.
        self._mounted_in: dict[Path, Mounts] = {}

    @property
    def cached_bytes(self) -> int:
        """File bytes currently held."""
        return sum(entry.size for entry in self._entries.values())

    def __contains__(self, key: tuple[str, str]) -> bool:
        return key in self._entries

    def materialize(
        self, store: Store, snapshot_id: str, dest: Path, mounts: Mounts | None = None
    ) -> Snapshot:
        """Give ``dest`` (absent) the snapshot's tree, from the cache when it holds it; an
        overlay is mounted in ``mounts`` (the run's slot namespace; the worker's own when
        None). The caller calls ``release(dest)`` when the run is over.

        Raises what ``snapshot_materialize`` raises (nothing is cached then), UnsafePath
        when the tree cannot be laid into ``dest``, and SandboxUnavailable when the
        namespace is gone.
        """
        mounts = mounts or HostMounts()
        key = (store.url or str(store.root), snapshot_id)
        # One lock: a cached tree is never evicted while it is being linked.
        with self._lock:
            cached = self._entries.get(key)
            if cached is None:
                cached = self._fill(store, snapshot_id, key)
                if cached is None:  # larger than the whole cache: cold, uncached
                    return snapshot_materialize(store, snapshot_id, dest)
            else:
                self._entries.move_to_end(key)
            try:
                if self.use_overlay and _mount_overlay(cached.path, dest, mounts):
                    self._mounted_in[dest] = mounts
                elif os.stat(cached.path).st_dev == os.stat(dest.parent).st_dev:
                    link_tree(cached.path, dest)
                else:  # hard links cannot cross filesystems: a cold tree instead
                    return snapshot_materialize(store, snapshot_id, dest)
            except OSError as exc:
                raise UnsafePath(f"{dest}: cannot link the cached snapshot ({exc})") from exc
            self._in_use[dest] = cached.path
            return cached.snapshot

    def release(self, dest: Path) -> None:
        """The run on ``dest`` is over: detach its overlay. A failure is logged, never
        raised over the run's receipt (docs/ARCHITECTURE.md, "Host-side walks")."""
        with self._lock:
            mounts = self._mounted_in.pop(dest, None)
        try:
            if mounts is not None:
                mounts.unmount(dest)
        except (OSError, SandboxUnavailable) as exc:
            log.warning("%s", exc)
        with self._lock:
            cached = self._in_use.pop(dest, None)
            if cached in self._evicted and cached not in self._in_use.values():
                self._evicted.discard(cached)
                discard_tree(cached)

    def _fill(self, store: Store, snapshot_id: str, key: tuple[str, str]) -> _Cached | None:
        filling = self.root / f".filling-{uuid.uuid4().hex}"
        try:
            snapshot = snapshot_materialize(store, snapshot_id, filling)
        except BaseException:
            discard_tree(filling)
            raise
        size = sum(entry.size for entry in snapshot.entries if entry.kind == "file")
        if size > self.max_bytes:
            discard_tree(filling)
            return None
        final = self.root / f"{snapshot_id}-{uuid.uuid4().hex[:8]}"
        filling.rename(final)
        cached = _Cached(final, snapshot, size)
        self._entries[key] = cached
        while self.cached_bytes > self.max_bytes:
            _, evicted = self._entries.popitem(last=False)
            if evicted.path in self._in_use.values():
                self._evicted.add(evicted.path)  # removed when its last run releases it
            else:
                discard_tree(evicted.path)
        return cached

    def close(self) -> None:
        """Remove every cached tree and the cache directory."""
        with self._lock:
            for dest, mounts in self._mounted_in.items():
                with contextlib.suppress(OSError, SandboxUnavailable):
                    mounts.unmount(dest)
            self._mounted_in.clear()
            self._in_use.clear()
            self._entries.clear()
            discard_tree(self.root)


_default: SnapshotCache | None = None
_default_lock = threading.Lock()


def default_snapshot_cache() -> SnapshotCache:
    """The process's cache (one per worker process, like its launchers); tests reset it."""
    global _default
    with _default_lock:
        if _default is None:
            _default = SnapshotCache()
            atexit.register(close_default_snapshot_cache)
        return _default


def close_default_snapshot_cache() -> None:
    """Remove the process's cache and forget it."""
    global _default
    with _default_lock:
        cache, _default = _default, None
    if cache is not None:
        cache.close()
