"""The old-tree second pass: when every directory's stat vouches for its listing and every
file is older than the racy window, only the files read are stat'ed again. What moves
must still be caught, and every change git would see must still change the id."""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from probe_service.errors import UnstableWorkingTree
from probe_service.snapshot import CaptureLimits, load_snapshot, snapshot_capture
from probe_service.snapshot import capture as capture_module
from probe_service.snapshot import reader as reader_module
from probe_service.snapshot import scan as scan_module
from probe_service.store import Store, open_store

from .conftest import start_later, write_tree

OLD_TREE = {"a": b"alpha", "b": b"bravo", "d/c": b"charlie", "d/e/f": b"foxtrot"}


def _full_passes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the second passes that ``lstat`` every file again (the list's length)."""
    calls: list[int] = []
    real = scan_module._restat_dirs

    def counting(*args: Any) -> Any:
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(scan_module, "_restat_dirs", counting)
    return calls


def _after_first_pass(monkeypatch: pytest.MonkeyPatch, act: Callable[[], None]) -> list[int]:
    """Run ``act`` after every first pass (once an attempt); the list counts the attempts."""
    attempts: list[int] = []
    real = capture_module.first_pass

    def then_act(*args: Any, **kwargs: Any) -> Any:
        scan = real(*args, **kwargs)
        attempts.append(1)
        act()
        return scan

    monkeypatch.setattr(capture_module, "first_pass", then_act)
    return attempts


def _rewrite(path: Path) -> None:
    """Rewrite ``path`` in place with other bytes of the same size."""
    data = path.read_bytes()
    path.write_bytes(bytes((byte + 1) % 256 for byte in data))


def _digest_of(store: Store, snapshot_id: str, path: str) -> str | None:
    entries = load_snapshot(store, snapshot_id).by_path()
    return entries[path].digest


class TestOldTreePass:
    def test_an_old_unchanged_tree_is_not_stated_twice(
        self, sqlite_store: Store, repo: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The shortcut is real: a recapture of an old tree stats no file a second time."""
        write_tree(repo, OLD_TREE)
        start_later(monkeypatch)
        snapshot_capture(sqlite_store, repo)
        full = _full_passes(monkeypatch)
        again = snapshot_capture(sqlite_store, repo)
        assert (again.read_files, full) == (0, [])

    def test_a_file_written_while_it_is_read_is_caught(
        self, sqlite_store: Store, repo: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A file read by the capture is stat'ed again after its read, old tree or not: one
        rewritten between its open and its read is refused, every attempt."""
        write_tree(repo, OLD_TREE)
        start_later(monkeypatch)
        real = reader_module._hash_and_compress
        writes: list[int] = []

        def write_then_read(fd: int, rel_path: str, *rest: Any) -> Any:
            if rel_path == "a":
                writes.append(1)
                _rewrite(repo / "a")
            return real(fd, rel_path, *rest)

        monkeypatch.setattr(reader_module, "_hash_and_compress", write_then_read)
        with pytest.raises(UnstableWorkingTree, match="a: file moved"):
            snapshot_capture(sqlite_store, repo)
        assert len(writes) == 3

    @pytest.mark.parametrize("recent", ["d/c", "d"], ids=["recent-file", "recent-directory"])
    def test_anything_recent_needs_the_full_second_pass(
        self, sqlite_store: Store, repo: Path, monkeypatch: pytest.MonkeyPatch, recent: str
    ) -> None:
        """One file or directory with a timestamp inside the racy window proves nothing
        about the moment the capture began: every file is stat'ed again, so an old cached
        file rewritten after the first pass refuses that attempt, and the next one
        captures its new content."""
        write_tree(repo, OLD_TREE)
        offset = start_later(monkeypatch)
        snapshot_capture(sqlite_store, repo)  # every file cached
        future = time.time_ns() + offset + 3600 * 10**9  # racy however slow the machine
        os.utime(repo / recent, ns=(future, future))
        attempts = _after_first_pass(
            monkeypatch, lambda: _rewrite(repo / "b") if len(attempts) == 1 else None
        )
        full = _full_passes(monkeypatch)
        result = snapshot_capture(sqlite_store, repo)
        assert (len(attempts), len(full)) == (2, 2)
        expected = hashlib.sha256((repo / "b").read_bytes()).hexdigest()
        assert _digest_of(sqlite_store, result.snapshot_id, "b") == expected

    def test_an_old_file_rewritten_after_its_stat_is_captured_as_it_was(
        self, sqlite_store: Store, repo: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """On an old tree the snapshot is the tree at the capture's start: a cached file
        rewritten after the first pass keeps its old content, and the next capture reads
        the new one."""
        write_tree(repo, OLD_TREE)
        start_later(monkeypatch)
        first = snapshot_capture(sqlite_store, repo).snapshot_id
        with monkeypatch.context() as patch:
            _after_first_pass(patch, lambda: _rewrite(repo / "b"))
            during = snapshot_capture(sqlite_store, repo)
        after = snapshot_capture(sqlite_store, repo)
        assert during.snapshot_id == first
        assert after.snapshot_id != first
        assert after.read_files == 1
        assert _digest_of(sqlite_store, first, "b") != _digest_of(
            sqlite_store, after.snapshot_id, "b"
        )


def _type_to_dir(root: Path) -> None:
    (root / "a").unlink()
    (root / "a").mkdir()
    (root / "a" / "inner").write_bytes(b"inner")


def _dir_to_file(root: Path) -> None:
    shutil.rmtree(root / "d" / "e")
    (root / "d" / "e").write_bytes(b"now a file")


def _same_size_same_mtime(root: Path) -> None:
    st = os.stat(root / "a")
    _rewrite(root / "a")
    os.utime(root / "a", ns=(st.st_atime_ns, st.st_mtime_ns))


CHANGES: dict[str, Callable[[Path], object]] = {
    "same-size-same-mtime": _same_size_same_mtime,
    "mode": lambda r: (r / "a").chmod(0o755),
    "link-retarget": lambda r: (os.unlink(r / "l"), (r / "l").symlink_to("b")),
    "file-to-dir": _type_to_dir,
    "file-to-link": lambda r: ((r / "a").unlink(), (r / "a").symlink_to("b")),
    "link-to-file": lambda r: ((r / "l").unlink(), (r / "l").write_bytes(b"was a link")),
    "dir-to-file": _dir_to_file,
    "dir-to-link": lambda r: (shutil.rmtree(r / "d" / "e"), (r / "d" / "e").symlink_to("..")),
    "added": lambda r: (r / "d" / "e" / "g").write_bytes(b"golf"),
    "added-empty-dir-file": lambda r: ((r / "n").mkdir(), (r / "n" / "x").write_bytes(b"")),
    "removed": lambda r: (r / "d" / "c").unlink(),
}


class TestEveryChangeIsSeen:
    """A recapture of an old tree through the stat cache and the old-tree pass sees every
    change git would, and gives the id a capture with no cache gives."""

    @pytest.mark.parametrize("change", list(CHANGES.values()), ids=list(CHANGES))
    def test_a_change_gives_the_uncached_id(
        self,
        sqlite_store: Store,
        repo: Path,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
        change: Callable[[Path], object],
    ) -> None:
        """The warm recapture's id differs from before and equals a fresh store's."""
        write_tree(repo, OLD_TREE)
        (repo / "l").symlink_to("a")
        start_later(monkeypatch)
        before = snapshot_capture(sqlite_store, repo).snapshot_id
        assert snapshot_capture(sqlite_store, repo).cached_files == len(OLD_TREE)
        change(repo)
        warm = snapshot_capture(sqlite_store, repo).snapshot_id
        capture_module._LAST_MANIFEST.clear()
        (tmp_path / "fresh").mkdir()
        fresh_store = open_store(tmp_path / "fresh")
        try:
            cold = snapshot_capture(fresh_store, repo).snapshot_id
        finally:
            fresh_store.close()
        assert warm != before
        assert warm == cold

    def test_a_skipped_directory_stays_outside(
        self, sqlite_store: Store, repo: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A file added under a dependency directory changes nothing, as before."""
        write_tree(repo, OLD_TREE)
        start_later(monkeypatch)
        before = snapshot_capture(sqlite_store, repo).snapshot_id
        write_tree(repo, {"node_modules/x/index.js": b"x", "d/.git/config": b"c"})
        assert snapshot_capture(sqlite_store, repo).snapshot_id == before


class TestWholeCacheHit:
    def test_an_unmoved_tree_inside_the_window_is_read_again(
        self, sqlite_store: Store, repo: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The one-comparison hit (every stat as cached) still asks the racy rule: cached
        files whose timestamps fall inside a capture's window are read again."""
        write_tree(repo, OLD_TREE)
        start_later(monkeypatch)
        snapshot_capture(sqlite_store, repo)
        wide = CaptureLimits(racy_window_ns=3600 * 10**9)
        assert snapshot_capture(sqlite_store, repo, limits=wide).read_files == len(OLD_TREE)
