"""``snapshot_capture``: a stabilized, content-addressed snapshot of a working tree."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict
from sqlalchemy import Connection, insert, select

from ..errors import UnsafePath, UnstableWorkingTree
from ..store import Store, append_event, utc_now
from ..store.schema import snapshots
from .as_reader import ReadCheck
from .blobwriter import BlobWriter
from .links import escaping_links
from .manifest import encode_tree
from .reader import FileStat, ReadBlob, open_dir_beneath, read_file_blob
from .scan import Scan, first_pass, second_pass
from .statcache import (
    CachedFiles,
    StatCache,
    cache_key_for,
    is_racy,
    load_stat_cache,
    none_racy,
    save_stat_cache,
)

__all__ = [
    "DEFAULT_LIMITS",
    "CaptureLimits",
    "CaptureResult",
    "GitSource",
    "snapshot_capture",
    "store_snapshot_row",
]

MiB = 1 << 20
#: What opening and stat'ing a file costs, counted as bytes when sizing read groups.
_FILE_COST_BYTES = 16 * 1024


@dataclass(frozen=True)
class CaptureLimits:
    """Fixed limits of one capture: 64 MiB a file, 256 MiB a workspace."""

    max_file_bytes: int = 64 * MiB
    max_total_bytes: int = 256 * MiB
    attempts: int = 3
    racy_window_ns: int = 2_000_000_000
    read_threads: int = 4
    #: Compressed bytes buffered before a batch of blobs is written.
    flush_bytes: int = 32 * MiB
    #: Raw bytes (plus a per-file allowance) read by one pool task.
    group_bytes: int = 1 * MiB


DEFAULT_LIMITS = CaptureLimits()
#: Escaping links a capture names (it still stores the snapshot: links are data).
MAX_REPORTED_ESCAPES = 20


class GitSource(BaseModel):
    """Where a capture from git objects read its tree (``snapshot capture --ref``)."""

    model_config = ConfigDict(frozen=True)

    repository: str
    ref: str
    tree: str
    #: The tree was captured before: one object lookup, nothing read (the tree-id cache).
    tree_cached: bool = False


class CaptureResult(BaseModel):
    """What a capture produced; ``created`` is false when the snapshot already existed."""

    model_config = ConfigDict(frozen=True)

    snapshot_id: str
    files: int
    symlinks: int
    #: Submodules, each recorded as a gitlink (path and commit; materialized empty).
    gitlinks: int = 0
    bytes: int
    read_files: int
    cached_files: int
    created: bool
    #: Links a run would refuse (the link rule, ``links.py``), at most
    #: ``MAX_REPORTED_ESCAPES``, each naming the link: a run on this snapshot ends
    #: ``inconclusive`` / ``snapshot_link_escapes`` (docs/ARCHITECTURE.md, "Snapshot links").
    escaping_links: tuple[str, ...] = ()
    #: Set for a capture from git objects (a ref), None for a work tree.
    git: GitSource | None = None


@dataclass(frozen=True)
class _Memo:
    """The inputs and output of one manifest encoding (see ``_encode_manifest``)."""

    scan: Scan
    digests: dict[str, str]
    snapshot_id: str
    manifest: bytes


#: Last manifest encoded per root in this process; bounded to a few roots.
_LAST_MANIFEST: dict[str, _Memo] = {}
_MEMO_ROOTS = 8
_MEMO_LOCK = threading.Lock()


def snapshot_capture(
    store: Store,
    root: Path,
    *,
    limits: CaptureLimits = DEFAULT_LIMITS,
    exact_root: bool = False,
    check_read: ReadCheck | None = None,
) -> CaptureResult:
    """Capture ``root`` into ``store`` and return the snapshot id with its summary.

    Raises LimitExceeded (file or workspace limit), UnstableWorkingTree (the tree kept
    moving), UnsafePath (unreadable root, non-UTF-8 name, or a name materialize would
    refuse, in the same words), StoreUnavailable. A refused
    capture writes no snapshot row and no event. With ``exact_root`` (a machine face's
    checked, link-free root) the directory read must still be exactly ``root``: one
    swapped for a link after the check is refused (UnsafePath). With ``check_read`` (the
    local service's caller: ``as_reader.py``) every scanned path must pass it before a
    byte is read or a cached digest used.
    """
    abs_root = os.path.abspath(root)
    if not os.path.isdir(abs_root):
        raise UnsafePath(f"{root}: not a directory")
    last_error: UnstableWorkingTree | None = None
    for _ in range(limits.attempts):
        try:
            return _capture_once(store, abs_root, limits, exact_root, check_read)
        except UnstableWorkingTree as exc:
            last_error = exc
    assert last_error is not None  # noqa: S101 - attempts >= 1
    raise UnstableWorkingTree(
        f"unstable working tree after {limits.attempts} attempts: {last_error}"
    ) from last_error


def _capture_once(
    store: Store,
    abs_root: str,
    limits: CaptureLimits,
    exact_root: bool,
    check_read: ReadCheck | None,
) -> CaptureResult:
    start_ns = time.time_ns()
    before = first_pass(abs_root, limits.max_file_bytes, limits.max_total_bytes)
    if check_read is not None:
        # The scan's stats are what gets read (each read compares them), so the inodes
        # the caller was allowed to open are the ones captured.
        check_read(abs_root, before.stats, before.targets)
    key = cache_key_for(abs_root)
    with store.reading() as conn:
        cache = load_stat_cache(conn, key)
    digests, to_read = _use_cache(before, cache, start_ns, limits)
    _read_and_store(store, abs_root, before, to_read, digests, limits, exact_root)
    after = second_pass(abs_root, before, start_ns, limits.racy_window_ns, to_read)
    _require_stable(before, after)
    snapshot_id, manifest = _encode_manifest(key, before, digests, reuse=not to_read)
    renewed = _renewed_cache(before, digests, cache, to_read, start_ns, limits)
    total = sum(st[0] for st in before.stats.values())
    with store.transaction() as conn:
        created = store_snapshot_row(conn, snapshot_id, manifest, len(before.stats), total)
        if renewed is not None:
            save_stat_cache(conn, key, renewed)
    return CaptureResult(
        snapshot_id=snapshot_id,
        files=len(before.stats),
        symlinks=len(before.targets),
        gitlinks=len(before.gitlinks),
        bytes=total,
        read_files=len(to_read),
        cached_files=len(before.stats) - len(to_read),
        created=created,
        escaping_links=tuple(why for _, why in escaping_links(before.targets))[
            :MAX_REPORTED_ESCAPES
        ],
    )


def store_snapshot_row(
    conn: Connection, snapshot_id: str, manifest: bytes, files: int, total: int
) -> bool:
    """Insert the snapshot row and its event unless it is stored; whether it was new."""
    exists = conn.execute(
        select(snapshots.c.snapshot_id).where(snapshots.c.snapshot_id == snapshot_id)
    ).first()
    if exists is None:
        conn.execute(
            insert(snapshots).values(
                snapshot_id=snapshot_id,
                manifest=manifest,
                files=files,
                bytes=total,
                created_at=utc_now(),
            )
        )
        append_event(conn, "snapshot", snapshot_id, {"files": files, "bytes": total})
    return exists is None


def _renewed_cache(
    scan: Scan,
    digests: dict[str, str],
    cache: CachedFiles,
    to_read: list[str],
    start_ns: int,
    limits: CaptureLimits,
) -> StatCache | None:
    """The root's stat cache after this capture (every file but a racy one), or None when
    it is the cache that was loaded: nothing was read and every entry was used."""
    if not to_read and len(cache) == len(scan.stats):
        return None
    return {
        path: (st, digests[path])
        for path, st in scan.stats.items()
        if not is_racy(st, start_ns, limits.racy_window_ns)
    }


def _use_cache(
    scan: Scan, cache: CachedFiles, start_ns: int, limits: CaptureLimits
) -> tuple[dict[str, str], list[str]]:
    """Return ``(digests of files the cache vouches for, paths that must be read)``."""
    if cache.stats == scan.stats and none_racy(scan.stats, start_ns, limits.racy_window_ns):
        return dict(cache.digests), []  # every file as cached (one comparison of maps)
    digests: dict[str, str] = {}
    to_read: list[str] = []
    recent = start_ns - limits.racy_window_ns  # is_racy, inlined: one test a file
    cached_stats, cached_digests = cache.stats, cache.digests
    for path, st in scan.stats.items():
        if cached_stats.get(path) == st and max(st[1], st[2]) < recent:
            digests[path] = cached_digests[path]
        else:
            to_read.append(path)
    return digests, to_read


def _encode_manifest(
    key: str, scan: Scan, digests: dict[str, str], *, reuse: bool
) -> tuple[str, bytes]:
    """Return ``(snapshot_id, manifest)``, reusing this process's last one for ``key``.

    The records are a pure function of (stats, symlink targets, digests), so when all
    three equal those of the last capture of this root the canonical manifest is byte for
    byte the same; comparing them costs ~1 ms where re-encoding costs ~40 ms a 10,000
    files (most of an unchanged recapture after the two lstat passes). Only a capture
    that read nothing (``reuse``) consults it, so cold-capture timings never lean on it.
    """
    memo = _LAST_MANIFEST.get(key) if reuse else None
    if (
        memo is not None
        and memo.scan.stats == scan.stats
        and memo.scan.targets == scan.targets
        and memo.scan.gitlinks == scan.gitlinks
        and memo.digests == digests
    ):
        return memo.snapshot_id, memo.manifest
    snapshot_id, manifest = encode_tree(
        [(path, bool(st[4] & 0o111), digests[path], st[0]) for path, st in scan.stats.items()],
        list(scan.targets.items()),
        list(scan.gitlinks.items()),
    )
    with _MEMO_LOCK:  # captures may run on several threads of one process
        if key not in _LAST_MANIFEST and len(_LAST_MANIFEST) >= _MEMO_ROOTS:
            _LAST_MANIFEST.pop(next(iter(_LAST_MANIFEST)))  # oldest root first
        _LAST_MANIFEST[key] = _Memo(scan, digests, snapshot_id, manifest)
    return snapshot_id, manifest


def _read_and_store(
    store: Store,
    abs_root: str,
    scan: Scan,
    to_read: list[str],
    digests: dict[str, str],
    limits: CaptureLimits,
    exact_root: bool = False,
) -> None:
    """Read files in parallel (hashing and zstd release the GIL) and write blob batches.

    Blobs are content-addressed, so a batch written before a refused capture is never
    referenced by a snapshot and changes nothing a reader can see.
    """
    root_fd = _open_root(abs_root, exact_root)
    try:
        _read_beneath(store, abs_root, root_fd, scan, to_read, digests, limits)
    finally:
        os.close(root_fd)


def _open_root(abs_root: str, exact_root: bool) -> int:
    """The root directory's descriptor every file is read beneath (docs/ARCHITECTURE.md,
    "Faces": capture roots); with ``exact_root`` it must be ``abs_root`` itself."""
    try:
        fd = os.open(abs_root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise UnstableWorkingTree(f"{abs_root}: changed while capturing ({exc.strerror})") from exc
    if exact_root and os.readlink(f"/proc/self/fd/{fd}") != abs_root:
        os.close(fd)
        raise UnsafePath(f"{abs_root}: the capture root was replaced after it was checked")
    return fd


def _read_beneath(
    store: Store,
    abs_root: str,
    root_fd: int,
    scan: Scan,
    to_read: list[str],
    digests: dict[str, str],
    limits: CaptureLimits,
) -> None:
    def read_group(group: list[str]) -> list[ReadBlob]:
        # A group holds neighbouring files: each directory is opened beneath the root
        # once for the files it holds, not once a file and component.
        blobs: list[ReadBlob] = []
        opened: tuple[str, int] | None = None
        try:
            for rel in group:
                parent = rel.rpartition("/")[0]
                if opened is None or opened[0] != parent:
                    if opened is not None:
                        os.close(opened[1])
                        opened = None
                    opened = (parent, _open_parent(root_fd, parent, rel))
                blobs.append(
                    read_file_blob(
                        os.path.join(abs_root, rel),
                        rel,
                        scan.stats[rel],
                        limits.max_file_bytes,
                        root_fd,
                        dir_fd=opened[1],
                    )
                )
        finally:
            if opened is not None:
                os.close(opened[1])
        return blobs

    pending: list[tuple[str, int, bytes]] = []
    pending_bytes = 0
    # One writer thread overlaps SQLite/PostgreSQL writes with reading; at most one batch
    # waits for it, so memory stays bounded by two batches.
    with (
        BlobWriter(store) as writer,
        ThreadPoolExecutor(max_workers=limits.read_threads) as pool,
        ThreadPoolExecutor(1) as db,
    ):
        in_flight: Future[None] | None = None
        for group in pool.map(read_group, _groups(to_read, scan.stats, limits.group_bytes)):
            for blob in group:
                digests[blob.path] = blob.digest
                pending.append((blob.digest, blob.size, blob.data))
                pending_bytes += len(blob.data)
            if pending_bytes >= limits.flush_bytes:
                if in_flight is not None:
                    in_flight.result()
                in_flight = db.submit(writer.write, pending)
                pending, pending_bytes = [], 0
        if in_flight is not None:
            in_flight.result()
        writer.write(pending)


def _open_parent(root_fd: int, parent: str, rel: str) -> int:
    try:
        return open_dir_beneath(root_fd, parent)
    except OSError as exc:
        raise UnstableWorkingTree(f"{rel}: changed while capturing ({exc.strerror})") from exc


def _groups(paths: list[str], stats: dict[str, FileStat], group_bytes: int) -> list[list[str]]:
    """Split ``paths`` into runs of about ``group_bytes`` each, one pool task per run.

    A task per file costs ~70 us of executor bookkeeping on the submitting thread, as
    much as reading a small file; runs of neighbouring files amortise it.
    """
    groups: list[list[str]] = []
    current: list[str] = []
    size = 0
    for path in paths:
        current.append(path)
        size += stats[path][0] + _FILE_COST_BYTES
        if size >= group_bytes:
            groups.append(current)
            current, size = [], 0
    if current:
        groups.append(current)
    return groups


def _require_stable(before: Scan, after: Scan) -> None:
    """Raise UnstableWorkingTree naming a path whose membership or metadata moved."""
    for name, old, new in (
        ("file", before.stats, after.stats),
        ("symlink", before.targets, after.targets),
        ("submodule", before.gitlinks, after.gitlinks),
    ):
        if old == new:
            continue
        moved = sorted(set(old) ^ set(new)) or sorted(p for p in old if old[p] != new.get(p))
        raise UnstableWorkingTree(f"{moved[0]}: {name} moved while capturing")
