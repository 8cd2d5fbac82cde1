"""``snapshot_materialize``: rebuild a snapshot byte for byte without following a link."""

from __future__ import annotations

import contextlib
import os
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from sqlalchemy import select

from ..errors import NotFound, UnsafePath
from ..fstree import make_directory
from ..store import Store
from ..store.schema import snapshots
from .blobs import decompress_blob, fetch_compressed
from .links import check_links
from .manifest import Entry, Snapshot, check_snapshot_path, decode_manifest

__all__ = ["load_snapshot", "snapshot_materialize"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
#: Decompress, verify and write in parallel: zstd, hashlib and write() release the GIL.
_WRITE_THREADS = 2
#: Compressed bytes handed to one writer task.
_GROUP_BYTES = 1 << 20


def load_snapshot(store: Store, snapshot_id: str) -> Snapshot:
    """Return the stored snapshot ``snapshot_id``.

    Raises NotFound when it is not stored, UnsafePath when its manifest is corrupt.
    """
    with store.reading() as conn:
        row = conn.execute(
            select(snapshots.c.manifest).where(snapshots.c.snapshot_id == snapshot_id)
        ).first()
    if row is None:
        raise NotFound(f"snapshot {snapshot_id}: not stored")
    return decode_manifest(snapshot_id, row.manifest)


def check_manifest_paths(entries: tuple[Entry, ...]) -> None:
    """Refuse a manifest whose paths are unsafe, repeated, or pass through another entry.

    Raises UnsafePath naming the first offending path.
    """
    seen: set[str] = set()
    for entry in entries:
        check_snapshot_path(entry.path)
        if entry.path in seen:
            raise UnsafePath(f"{entry.path}: appears twice in the manifest")
        seen.add(entry.path)
    for entry in entries:
        parts = entry.path.split("/")
        for depth in range(1, len(parts)):
            prefix = "/".join(parts[:depth])
            if prefix in seen:
                raise UnsafePath(f"{entry.path}: would pass through {prefix!r}")


def snapshot_materialize(store: Store, snapshot_id: str, dest: Path) -> Snapshot:
    """Write snapshot ``snapshot_id`` into ``dest`` (absent or an empty directory).

    A gitlink (submodule) becomes an empty directory.
    Raises NotFound (no such snapshot or blob), LinkEscapes (a link that is absolute or
    resolves outside the snapshot, named; nothing is written), UnsafePath (unsafe
    manifest path, a destination that is not an empty directory, or a link met while
    writing).
    """
    snapshot = load_snapshot(store, snapshot_id)
    check_manifest_paths(snapshot.entries)
    check_links(snapshot.entries)
    root_fd = _open_empty_dest(dest)
    writer = _TreeWriter(root_fd)
    try:
        files = [e for e in snapshot.entries if e.kind == "file"]
        for entry in files:
            writer.make_parents(entry.path)
        by_digest: dict[str, list[Entry]] = {}
        for entry in files:
            by_digest.setdefault(str(entry.digest), []).append(entry)

        def write_group(group: list[tuple[str, bytes]]) -> None:
            for digest, data in group:
                raw = decompress_blob(digest, data, by_digest[digest][0].size)
                for entry in by_digest[digest]:
                    writer.write_file(entry.path, raw, entry.executable)

        with ThreadPoolExecutor(max_workers=_WRITE_THREADS) as pool, store.reading() as conn:
            # One task per ~1 MiB of blobs: a task per small file costs more than its write.
            pending: list[Future[None]] = []
            group: list[tuple[str, bytes]] = []
            size = 0
            for digest, data in fetch_compressed(conn, by_digest):
                group.append((digest, data))
                size += len(data)
                if size >= _GROUP_BYTES:
                    pending.append(pool.submit(write_group, group))
                    group, size = [], 0
            pending.append(pool.submit(write_group, group))
            for future in pending:
                future.result()
        # A submodule is its gitlink: an empty directory, as a checkout without
        # --recurse-submodules leaves it (docs/ARCHITECTURE.md, "Snapshot capture").
        for entry in snapshot.entries:
            if entry.kind == "gitlink":
                writer.make_directory(entry.path)
        # Links last, so no write can ever land behind one.
        for entry in snapshot.entries:
            if entry.kind == "symlink":
                writer.write_symlink(entry.path, str(entry.target))
    finally:
        writer.close()
    return snapshot


def _open_empty_dest(dest: Path) -> int:
    make_directory(dest, 0o755, "destination")
    try:
        fd = os.open(dest, _DIR_FLAGS)
    except OSError as exc:
        raise UnsafePath(f"{dest}: destination is not a directory ({exc.strerror})") from exc
    if os.listdir(fd):
        os.close(fd)
        raise UnsafePath(f"{dest}: destination is not empty")
    return fd


class _TreeWriter:
    """Creates files under one directory fd, opening every component with O_NOFOLLOW."""

    def __init__(self, root_fd: int) -> None:
        self._dirs: dict[str, int] = {"": root_fd}

    def _dir_fd(self, rel_dir: str) -> int:
        fd = self._dirs.get(rel_dir)
        if fd is not None:
            return fd
        # Iterative, not recursive: the manifest decides the depth (docs/ARCHITECTURE.md,
        # "Host-side walks"); check_snapshot_path bounds it.
        missing: list[str] = []
        while rel_dir not in self._dirs:
            missing.append(rel_dir)
            rel_dir = rel_dir.rpartition("/")[0]
        parent_fd = self._dirs[rel_dir]
        for rel in reversed(missing):
            name = rel.rpartition("/")[2]
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o755, dir_fd=parent_fd)
            try:
                parent_fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
            except OSError as exc:
                raise UnsafePath(f"{rel}: not a plain directory ({exc.strerror})") from exc
            self._dirs[rel] = parent_fd
        return parent_fd

    def make_parents(self, rel: str) -> None:
        """Create the directories above ``rel`` (done up front, before writers run)."""
        parent = rel.rpartition("/")[0]
        self._dir_fd(parent)

    def make_directory(self, rel: str) -> None:
        """Create the directory ``rel`` (and those above it), following no link."""
        self._dir_fd(rel)

    def write_file(self, rel: str, data: bytes, executable: bool) -> None:
        parent, _, name = rel.rpartition("/")
        mode = 0o755 if executable else 0o644
        try:
            fd = os.open(name, _FILE_FLAGS, mode, dir_fd=self._dir_fd(parent))
        except OSError as exc:
            raise UnsafePath(f"{rel}: cannot create file ({exc.strerror})") from exc
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, mode)  # the umask must not decide the executable bit
        finally:
            os.close(fd)

    def write_symlink(self, rel: str, target: str) -> None:
        parent, _, name = rel.rpartition("/")
        try:
            os.symlink(target, name, dir_fd=self._dir_fd(parent))
        except OSError as exc:
            raise UnsafePath(f"{rel}: cannot create symlink ({exc.strerror})") from exc

    def close(self) -> None:
        for fd in self._dirs.values():
            os.close(fd)
        self._dirs.clear()
