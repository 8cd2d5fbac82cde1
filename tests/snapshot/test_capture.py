"""snapshot_capture: ids, blobs, enumeration, limits, stabilization and the stat cache."""

from __future__ import annotations

import os
import subprocess
import time
import tracemalloc
from pathlib import Path

import pytest
from sqlalchemy import func, select

from probe_service.errors import LimitExceeded, UnsafePath, UnstableWorkingTree
from probe_service.snapshot import CaptureLimits, load_snapshot, snapshot_capture
from probe_service.snapshot import capture as capture_module
from probe_service.store import Store, read_events
from probe_service.store.schema import blobs, snapshots

from .conftest import write_tree

NO_RACY = CaptureLimits(racy_window_ns=0)


def _count(store: Store, table: object) -> int:
    with store.reading() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())  # type: ignore[arg-type]


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["/usr/bin/git", *args], cwd=repo, check=True, capture_output=True)


class TestIdentity:
    def test_same_tree_same_id(self, sqlite_store: Store, repo: Path) -> None:
        """Capturing an unchanged tree twice gives the same id and one snapshot row."""
        write_tree(repo, {"a.txt": b"a", "d/b.txt": b"b"})
        first = snapshot_capture(sqlite_store, repo)
        second = snapshot_capture(sqlite_store, repo)
        assert first.snapshot_id == second.snapshot_id
        assert (first.created, second.created) == (True, False)
        assert _count(sqlite_store, snapshots) == 1

    @pytest.mark.parametrize(
        "change",
        [
            lambda r: (r / "a.txt").write_bytes(b"A"),
            lambda r: (r / "a.txt").chmod(0o755),
            lambda r: (r / "new.txt").write_bytes(b""),
            lambda r: (r / "link").symlink_to("a.txt"),
            lambda r: (r / "a.txt").rename(r / "renamed.txt"),
        ],
        ids=["content", "exec-bit", "added-empty", "added-symlink", "rename"],
    )
    def test_any_change_changes_id(self, sqlite_store: Store, repo: Path, change: object) -> None:
        """Content, executable bit, membership and links all enter the id."""
        write_tree(repo, {"a.txt": b"a"})
        before = snapshot_capture(sqlite_store, repo).snapshot_id
        change(repo)  # type: ignore[operator]
        assert snapshot_capture(sqlite_store, repo).snapshot_id != before

    def test_symlink_target_recorded_not_followed(
        self, sqlite_store: Store, repo: Path, tmp_path: Path
    ) -> None:
        """A symlink to a file outside the tree is recorded as its target, never read."""
        secret = tmp_path / "secret"
        secret.write_bytes(b"outside")
        (repo / "link").symlink_to(secret)
        snapshot = load_snapshot(sqlite_store, snapshot_capture(sqlite_store, repo).snapshot_id)
        (entry,) = snapshot.entries
        assert (entry.kind, entry.target, entry.digest) == ("symlink", str(secret), None)

    def test_identical_content_stored_once(self, sqlite_store: Store, repo: Path) -> None:
        """Blobs are content-addressed: two files with equal bytes share one blob."""
        write_tree(repo, {"a": b"same", "b/c": b"same", "d": b"other"})
        snapshot_capture(sqlite_store, repo)
        assert _count(sqlite_store, blobs) == 2

    def test_capture_emits_one_event(self, sqlite_store: Store, repo: Path) -> None:
        """A new snapshot appends one snapshot event; a repeat appends none."""
        write_tree(repo, {"a": b"1"})
        result = snapshot_capture(sqlite_store, repo)
        snapshot_capture(sqlite_store, repo)
        with sqlite_store.reading() as conn:
            found = read_events(conn, 0, 10)
        assert [(e.kind, e.subject) for e in found] == [("snapshot", result.snapshot_id)]


class TestEnumeration:
    def test_walk_skips_dependency_and_state_dirs(self, sqlite_store: Store, repo: Path) -> None:
        """Outside git, .git, .zyte, node_modules, .venv and __pycache__ are never embedded."""
        write_tree(
            repo,
            {
                "src/a.py": b"x",
                "node_modules/p/index.js": b"x",
                ".venv/bin/python": b"x",
                "src/__pycache__/a.pyc": b"x",
                ".zyte/x": b"x",
            },
        )
        snapshot = load_snapshot(sqlite_store, snapshot_capture(sqlite_store, repo).snapshot_id)
        assert [e.path for e in snapshot.entries] == ["src/a.py"]

    def test_git_respects_gitignore(self, sqlite_store: Store, repo: Path) -> None:
        """Inside a work tree, ignored files are left out and untracked ones kept."""
        _git(repo, "init", "-q")
        write_tree(repo, {".gitignore": b"*.log\n", "kept.txt": b"k", "noise.log": b"n"})
        snapshot = load_snapshot(sqlite_store, snapshot_capture(sqlite_store, repo).snapshot_id)
        assert [e.path for e in snapshot.entries] == [".gitignore", "kept.txt"]

    def test_git_shim_in_repository_never_runs(
        self, sqlite_store: Store, repo: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A `git` shim inside the repository, reachable through a relative PATH, never runs."""
        _git(repo, "init", "-q")
        marker = repo.parent / "shim-ran"
        shim = repo / "git"
        shim.write_text(f"#!/bin/sh\ntouch {marker}\n")
        shim.chmod(0o755)
        monkeypatch.chdir(repo)
        monkeypatch.setenv("PATH", f".:{repo}:{os.environ['PATH']}")
        snapshot_capture(sqlite_store, Path("."))
        assert not marker.exists()

    def test_repository_fsmonitor_hook_never_runs(self, sqlite_store: Store, repo: Path) -> None:
        """core.fsmonitor configured by the repository is not executed by enumeration."""
        _git(repo, "init", "-q")
        marker = repo.parent / "hook-ran"
        hook = repo.parent / "hook.sh"
        hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
        hook.chmod(0o755)
        write_tree(repo, {"a": b"a"})
        _git(repo, "add", "a")
        _git(repo, "config", "core.fsmonitor", str(hook))
        snapshot_capture(sqlite_store, repo)
        assert not marker.exists()

    def test_non_utf8_name_refused(self, sqlite_store: Store, repo: Path) -> None:
        """A file name that is not UTF-8 is refused rather than mangled."""
        (repo / os.fsdecode(b"bad\xff")).write_bytes(b"x")
        with pytest.raises(UnsafePath, match="not UTF-8"):
            snapshot_capture(sqlite_store, repo)


class TestLimits:
    def test_file_over_limit_refused_without_reading(self, sqlite_store: Store, repo: Path) -> None:
        """A file past 64 MiB is refused by size, naming the path and the limit."""
        with open(repo / "huge.bin", "wb") as handle:
            handle.truncate(64 * 1024 * 1024 + 1)
        tracemalloc.start()
        with pytest.raises(LimitExceeded, match=r"huge\.bin: .*67108864-byte file limit"):
            snapshot_capture(sqlite_store, repo)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert peak < 4 * 1024 * 1024

    def test_workspace_over_limit_refused(self, sqlite_store: Store, repo: Path) -> None:
        """A workspace past its byte limit is refused and writes no snapshot or event."""
        write_tree(repo, {"a": b"x" * 600, "b": b"y" * 600})
        with pytest.raises(LimitExceeded, match="1000-byte workspace limit"):
            snapshot_capture(sqlite_store, repo, limits=CaptureLimits(max_total_bytes=1000))
        assert _count(sqlite_store, snapshots) == 0
        with sqlite_store.reading() as conn:
            assert read_events(conn, 0, 10) == []

    def test_default_limits_are_the_documented_ones(self) -> None:
        """The defaults are 64 MiB a file and 256 MiB a workspace (seed 000)."""
        assert CaptureLimits().max_file_bytes == 64 * 2**20
        assert CaptureLimits().max_total_bytes == 256 * 2**20

    def test_large_file_is_streamed_not_buffered(self, sqlite_store: Store, repo: Path) -> None:
        """A 48 MiB file is hashed in chunks: peak memory stays far below its size."""
        with open(repo / "big.bin", "wb") as handle:
            handle.truncate(48 * 1024 * 1024)
        tracemalloc.start()
        snapshot_capture(sqlite_store, repo)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert peak < 12 * 1024 * 1024


class TestStabilization:
    def _moving(self, monkeypatch: pytest.MonkeyPatch, repo: Path, times: int) -> None:
        """Make `victim.txt` change during the next ``times`` reads (real writes, real files)."""
        real = capture_module.read_file_blob
        left = [times]

        def read_then_touch(*args: object, **kwargs: object) -> object:
            blob = real(*args, **kwargs)  # type: ignore[arg-type]
            if left[0] > 0:
                left[0] -= 1
                (repo / "victim.txt").write_bytes(b"moved" * (5 - left[0]))
            return blob

        monkeypatch.setattr(capture_module, "read_file_blob", read_then_touch)

    def test_persistently_moving_tree_refused(
        self, sqlite_store: Store, repo: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A file that moves on every attempt ends in UnstableWorkingTree naming it."""
        write_tree(repo, {"victim.txt": b"v"})
        self._moving(monkeypatch, repo, times=100)
        with pytest.raises(UnstableWorkingTree, match=r"victim\.txt"):
            snapshot_capture(sqlite_store, repo)
        assert _count(sqlite_store, snapshots) == 0

    def test_tree_that_settles_is_captured(
        self, sqlite_store: Store, repo: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A file that moves once is re-read and the final content is captured."""
        write_tree(repo, {"victim.txt": b"v"})
        self._moving(monkeypatch, repo, times=1)
        result = snapshot_capture(sqlite_store, repo)
        snapshot = load_snapshot(sqlite_store, result.snapshot_id)
        assert snapshot.entries[0].size == len(b"moved" * 5)


class TestStatCache:
    def test_unchanged_files_are_not_read_again(self, sqlite_store: Store, repo: Path) -> None:
        """A recapture of old, unchanged files answers from the stat cache."""
        write_tree(repo, {"a": b"1", "b": b"2"})
        snapshot_capture(sqlite_store, repo, limits=NO_RACY)
        again = snapshot_capture(sqlite_store, repo, limits=NO_RACY)
        assert (again.read_files, again.cached_files) == (0, 2)

    def test_changed_file_is_read_again(self, sqlite_store: Store, repo: Path) -> None:
        """A file rewritten since the last capture is hashed again."""
        write_tree(repo, {"a": b"1", "b": b"2"})
        first = snapshot_capture(sqlite_store, repo, limits=NO_RACY)
        (repo / "a").write_bytes(b"3")
        again = snapshot_capture(sqlite_store, repo, limits=NO_RACY)
        assert again.read_files == 1
        assert again.snapshot_id != first.snapshot_id

    def test_racy_file_is_never_cached(self, sqlite_store: Store, repo: Path) -> None:
        """A file modified within the racy window is read on every capture."""
        write_tree(repo, {"a": b"1"})
        window = CaptureLimits(racy_window_ns=3600 * 10**9)
        snapshot_capture(sqlite_store, repo, limits=window)
        again = snapshot_capture(sqlite_store, repo, limits=window)
        assert again.read_files == 1

    def test_same_size_rewrite_in_same_tick_detected(self, sqlite_store: Store, repo: Path) -> None:
        """Same size and restored mtime still re-read: ctime and the racy rule catch it."""
        write_tree(repo, {"a": b"1"})
        st = os.stat(repo / "a")
        snapshot_capture(sqlite_store, repo)
        (repo / "a").write_bytes(b"2")
        os.utime(repo / "a", ns=(st.st_atime_ns, st.st_mtime_ns))
        time.sleep(0.01)
        result = snapshot_capture(sqlite_store, repo)
        assert load_snapshot(sqlite_store, result.snapshot_id).entries[0].digest == (
            "d4735e3a265e16eee03f59718b9b5d03019c07d8b6c51f90da3a666eec13ab35"
        )
