"""``snapshot_capture_ref``: a snapshot of the tree a git ref names, read from objects.

The snapshot is the one a work-tree capture of a clean checkout of that tree gives when no
attribute rewrites bytes (docs/ARCHITECTURE.md, "Snapshots from git"): the same skipped
directories, name rules, limits and manifest; a ``100755`` blob is an executable file, a
``120000`` blob a link whose target is its bytes, a ``160000`` entry a gitlink. Blobs are
recorded as git stores them, each checked against its object id. A tree captured before
from the same object directory costs one object lookup: its id keys the capture's summary
(the tree-id cache, a ``stat_packs`` row under ``git:tree:<host>:<objects>:<tree>``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from ..errors import LimitExceeded, UnsafePath
from ..store import Store
from .as_reader import Reader
from .blobwriter import BlobWriter
from .capture import (
    DEFAULT_LIMITS,
    MAX_REPORTED_ESCAPES,
    CaptureLimits,
    CaptureResult,
    GitSource,
    store_snapshot_row,
)
from .enumerate import SKIPPED_DIRS
from .gitcache import (
    MAX_BLOB_ENTRIES,
    blob_cache_key,
    load_blob_cache,
    load_tree_summary,
    save_blob_cache,
    save_tree_summary,
    tree_cache_key,
)
from .gitobjects import GitObjects, TreeItem, check_ref, open_repository
from .links import escaping_links
from .manifest import check_snapshot_paths, encode_tree
from .reader import hash_and_compress_bytes
from .scan import check_limits, require_utf8_all

__all__ = ["snapshot_capture_ref", "snapshot_capture_refs"]

#: A link target longer than the kernel's PATH_MAX could never be created.
_MAX_LINK_BYTES = 4096
#: Raw bytes of blobs handed to one hashing task.
_GROUP_BYTES = 1 << 20
#: Hashing and zstd release the GIL; the git pipe is read on the calling thread.
_HASH_THREADS = 2


def snapshot_capture_ref(
    store: Store,
    repository: Path,
    ref: str,
    roots: tuple[str, ...],
    *,
    limits: CaptureLimits = DEFAULT_LIMITS,
    reader: Reader | None = None,
) -> CaptureResult:
    """Capture the tree ``ref`` names in ``repository`` (whose git directory, objects and
    alternates must lie inside ``roots``) without a checkout; with ``reader`` (the local
    service's caller) git reads the objects as that user.

    Raises InvalidInput (a ref that is not a plain revision, or names a blob), NotFound
    (no repository, no such ref), UnsafePath (git confinement, a name capture refuses),
    LimitExceeded (file or workspace limit, checked before a blob is read),
    SandboxUnavailable (no git), StoreUnavailable. A refusal writes no snapshot row.
    """
    return snapshot_capture_refs(store, repository, [ref], roots, limits=limits, reader=reader)[0]


def snapshot_capture_refs(
    store: Store,
    repository: Path,
    refs: list[str],
    roots: tuple[str, ...],
    *,
    limits: CaptureLimits = DEFAULT_LIMITS,
    reader: Reader | None = None,
) -> list[CaptureResult]:
    """``snapshot_capture_ref`` of several refs over one git process; every ref is
    resolved (or refused) before any tree is captured, so a bad one writes nothing.

    Raises as ``snapshot_capture_ref``.
    """
    for ref in refs:
        check_ref(ref)
    repo = open_repository(repository, roots)
    results: list[CaptureResult] = []
    with GitObjects(repo, reader) as git:
        trees = [git.resolve_tree(ref) for ref in refs]
        for ref, tree in zip(refs, trees, strict=True):
            key = tree_cache_key(repo.objects, tree)
            cached = _cached(store, key)
            source = GitSource(
                repository=repo.path, ref=ref, tree=tree, tree_cached=cached is not None
            )
            if cached is None:
                cached = _capture_tree(
                    store, git, (tree, key, blob_cache_key(repo.objects)), limits
                )
            results.append(cached.model_copy(update={"git": source}))
    return results


def _cached(store: Store, key: str) -> CaptureResult | None:
    summary = load_tree_summary(store, key)
    if summary is None:
        return None
    return CaptureResult.model_validate(
        {**summary, "read_files": 0, "cached_files": summary.get("files", 0), "created": False}
    )


def _capture_tree(
    store: Store, git: GitObjects, keys: tuple[str, str, str], limits: CaptureLimits
) -> CaptureResult:
    """Capture one tree: ``keys`` are its id, its tree-id cache key and the blob cache's."""
    tree, tree_key, blob_key = keys
    items = git.walk_tree(tree, SKIPPED_DIRS)
    paths = sorted(item.path for item in items)
    require_utf8_all(paths)
    check_snapshot_paths(paths)
    files = [i for i in items if i.kind in ("file", "exec")]
    links = [i for i in items if i.kind == "symlink"]
    known = load_blob_cache(store, blob_key)
    sizes = {i.oid: known[i.oid][1] for i in files if i.oid in known}
    sizes.update(_sizes(git, [i.oid for i in files + links if i.oid not in sizes]))
    check_limits(
        {i.path: sizes[i.oid] for i in files}, limits.max_file_bytes, limits.max_total_bytes
    )
    targets = _link_targets(git, links, sizes)
    to_read = sorted({i.oid for i in files if i.oid not in known})
    digests = {i.oid: known[i.oid][0] for i in files if i.oid in known}
    digests.update(_read_blobs(store, git, to_read, sizes))
    snapshot_id, manifest = encode_tree(
        [(i.path, i.kind == "exec", digests[i.oid], sizes[i.oid]) for i in files],
        list(targets.items()),
        [(i.path, i.oid) for i in items if i.kind == "gitlink"],
    )
    total = sum(sizes[i.oid] for i in files)
    read = set(to_read)
    result = CaptureResult(
        snapshot_id=snapshot_id,
        files=len(files),
        symlinks=len(targets),
        gitlinks=len(items) - len(files) - len(links),
        bytes=total,
        read_files=sum(1 for i in files if i.oid in read),  # as a work-tree capture counts
        cached_files=sum(1 for i in files if i.oid not in read),
        created=False,
        escaping_links=tuple(why for _, why in escaping_links(targets))[:MAX_REPORTED_ESCAPES],
    )
    summary = result.model_dump(exclude={"git", "created", "read_files", "cached_files"})
    this_tree = {oid: (digest, sizes[oid]) for oid, digest in digests.items()}
    renewed = {**known, **this_tree} if len(known) + len(read) <= MAX_BLOB_ENTRIES else this_tree
    with store.transaction() as conn:
        created = store_snapshot_row(conn, snapshot_id, manifest, len(files), total)
        save_tree_summary(conn, tree_key, summary)
        if read or len(renewed) != len(known):
            save_blob_cache(conn, blob_key, renewed)
    return result.model_copy(update={"created": created})


def _sizes(git: GitObjects, oids: list[str]) -> dict[str, int]:
    unique = sorted(set(oids))
    sizes: dict[str, int] = {}
    for oid, (_, kind, size) in zip(unique, git.info(unique), strict=True):
        if size is None or kind != "blob":
            raise UnsafePath(f"object {oid}: {kind}, not a blob")
        sizes[oid] = size
    return sizes


def _link_targets(git: GitObjects, links: list[TreeItem], sizes: dict[str, int]) -> dict[str, str]:
    for item in links:
        if sizes[item.oid] > _MAX_LINK_BYTES:
            raise LimitExceeded(
                f"{item.path}: a {sizes[item.oid]}-byte link target passes {_MAX_LINK_BYTES}"
            )
    unique = sorted({i.oid for i in links})
    raw = {oid: data for oid, _, data in git.contents(unique)}
    targets = {i.path: raw[i.oid].decode("utf-8", "surrogateescape") for i in links}
    require_utf8_all(list(targets.values()))
    return targets


def _groups(oids: list[str], sizes: dict[str, int]) -> Iterator[list[str]]:
    group: list[str] = []
    size = 0
    for oid in oids:
        group.append(oid)
        size += sizes[oid]
        if size >= _GROUP_BYTES:
            yield group
            group, size = [], 0
    if group:
        yield group


def _read_blobs(
    store: Store, git: GitObjects, oids: list[str], sizes: dict[str, int]
) -> dict[str, str]:
    """Read each blob once from git, hash and compress on a pool, write in batches;
    return ``git oid -> SHA-256``."""
    digests: dict[str, str] = {}

    def hash_group(group: list[tuple[str, bytes]]) -> list[tuple[str, str, int, bytes]]:
        return [(oid, *_hashed(data)) for oid, data in group]

    def write(future: Future[list[tuple[str, str, int, bytes]]]) -> None:
        rows = future.result()
        writer.write([(digest, size, data) for _, digest, size, data in rows])
        digests.update((oid, digest) for oid, digest, _, _ in rows)

    with BlobWriter(store) as writer, ThreadPoolExecutor(max_workers=_HASH_THREADS) as pool:
        contents = git.contents(oids)
        pending: deque[Future[list[tuple[str, str, int, bytes]]]] = deque()
        for group in _groups(oids, sizes):
            taken = [(oid, data) for oid, _, data in _take(contents, len(group))]
            pending.append(pool.submit(hash_group, taken))
            if len(pending) > 2 * _HASH_THREADS:  # bounded memory: a few groups in flight
                write(pending.popleft())
        while pending:
            write(pending.popleft())
        for _ in contents:  # nothing left: lets the request writer be joined
            pass
    return digests


def _hashed(data: bytes) -> tuple[str, int, bytes]:
    digest, compressed = hash_and_compress_bytes(data)
    return digest, len(data), compressed


def _take(
    contents: Iterator[tuple[str, str, bytes]], count: int
) -> Iterator[tuple[str, str, bytes]]:
    for _ in range(count):
        yield next(contents)
