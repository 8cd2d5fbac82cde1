"""Submodules are gitlinks (path and commit) on both capture paths, never silently dropped;
another user's repository is captured by root with ``safe.directory`` for that call only."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from probe_service.claims import PYTHON_CALLER, changed_paths
from probe_service.claims.callers import snapshots_for
from probe_service.errors import UnsafePath
from probe_service.snapshot import (
    load_snapshot,
    snapshot_capture,
    snapshot_capture_ref,
    snapshot_materialize,
)
from probe_service.snapshot.manifest import Entry, encode_manifest
from probe_service.store import Store

from .gitrepos import GIT, clean_checkout, commit_all, git, init_repo, write


@pytest.fixture
def super_repo(tmp_path: Path) -> tuple[Path, Path, str]:
    """``(superproject, submodule source, submodule commit)``: one submodule at ``lib/sub``."""
    sub = init_repo(tmp_path / "sub")
    write(sub, "inner.txt", b"inner\n")
    sub_commit = commit_all(sub, "sub")
    top = init_repo(tmp_path / "top")
    write(top, "a.txt", b"a\n")
    git(top, "submodule", "add", "-q", str(sub), "lib/sub")
    commit_all(top, "with submodule")
    return top, sub, sub_commit


class TestWorkTree:
    def test_submodule_recorded_as_gitlink(
        self, sqlite_store: Store, super_repo: tuple[Path, Path, str]
    ) -> None:
        """A checked-out submodule is one gitlink entry with its commit; its files are not
        captured and it is not dropped."""
        top, _, sub_commit = super_repo
        result = snapshot_capture(sqlite_store, top)
        entries = load_snapshot(sqlite_store, result.snapshot_id).by_path()
        assert result.gitlinks == 1
        assert entries["lib/sub"] == Entry(path="lib/sub", kind="gitlink", commit=sub_commit)
        assert "lib/sub/inner.txt" not in entries
        assert {".gitmodules", "a.txt"} <= set(entries)

    def test_uninitialized_submodule_is_the_same_gitlink(
        self, sqlite_store: Store, super_repo: tuple[Path, Path, str], tmp_path: Path
    ) -> None:
        """A clone without --recurse-submodules (an empty directory) captures the same."""
        top, _, _ = super_repo
        clone = clean_checkout(top, "main", tmp_path / "clone")
        assert os.listdir(clone / "lib/sub") == []
        assert snapshot_capture(sqlite_store, clone).snapshot_id == (
            snapshot_capture(sqlite_store, top).snapshot_id
        )

    def test_ref_capture_equals_work_tree_capture(
        self, sqlite_store: Store, super_repo: tuple[Path, Path, str], tmp_path: Path
    ) -> None:
        """The tree's 160000 entry gives the same gitlink as the work tree's index."""
        top, _, _ = super_repo
        from_ref = snapshot_capture_ref(sqlite_store, top, "main", (str(tmp_path),))
        assert from_ref.gitlinks == 1
        assert from_ref.snapshot_id == snapshot_capture(sqlite_store, top).snapshot_id

    def test_materialized_as_empty_directory(
        self, sqlite_store: Store, super_repo: tuple[Path, Path, str], tmp_path: Path
    ) -> None:
        """Materialize recreates a gitlink as an empty directory."""
        top, _, _ = super_repo
        result = snapshot_capture(sqlite_store, top)
        dest = tmp_path / "out"
        snapshot_materialize(sqlite_store, result.snapshot_id, dest)
        assert (dest / "lib/sub").is_dir()
        assert os.listdir(dest / "lib/sub") == []
        assert (dest / "a.txt").read_bytes() == b"a\n"

    def test_submodule_bump_is_a_changed_path(
        self, sqlite_store: Store, super_repo: tuple[Path, Path, str]
    ) -> None:
        """Moving the submodule to another commit changes the id and is a changed path."""
        top, _, _ = super_repo
        before = snapshot_capture(sqlite_store, top).snapshot_id
        inner = top / "lib/sub"
        write(inner, "inner.txt", b"bumped\n")
        commit_all(inner, "bump")
        git(top, "add", "lib/sub")
        after = snapshot_capture(sqlite_store, top).snapshot_id
        assert after != before
        source = snapshots_for(sqlite_store, PYTHON_CALLER)
        moved = changed_paths(source.require(before, "from"), source.require(after, "to"))
        assert moved == ["lib/sub"]

    def test_untracked_nested_repository_is_refused_not_dropped(
        self, sqlite_store: Store, tmp_path: Path
    ) -> None:
        """A nested repository the index does not record (git lists it as ``nested/``) is
        refused naming it, as before: never silently dropped, never a gitlink."""
        top = init_repo(tmp_path / "t")
        write(top, "a", b"a")
        commit_all(top)
        nested = init_repo(top / "nested")
        write(nested, "n", b"n")
        commit_all(nested)
        with pytest.raises(UnsafePath, match="'nested/'"):
            snapshot_capture(sqlite_store, top)


def test_gitlink_id_is_pinned() -> None:
    """A manifest with a gitlink hashes as its canonical record: commit, kind, path."""
    snapshot_id, _ = encode_manifest([Entry(path="m", kind="gitlink", commit="ab" * 20)])
    from probe_service.canonical import canonical_json, sha256_hex

    record = {"commit": "ab" * 20, "kind": "gitlink", "path": "m"}
    assert snapshot_id == sha256_hex(canonical_json({"version": 1, "entries": [record]}))


def test_materialize_refuses_a_file_below_a_gitlink(sqlite_store: Store, tmp_path: Path) -> None:
    """A manifest with a file inside a gitlink's directory is refused."""
    from sqlalchemy import insert

    from probe_service.store.schema import snapshots

    entries = [
        Entry(path="m", kind="gitlink", commit="ab" * 20),
        Entry(path="m/x", kind="symlink", target="y"),
    ]
    snapshot_id, manifest = encode_manifest(entries)
    with sqlite_store.transaction() as conn:
        conn.execute(
            insert(snapshots).values(
                snapshot_id=snapshot_id, manifest=manifest, files=0, bytes=0, created_at="now"
            )
        )
    with pytest.raises(UnsafePath, match="would pass through 'm'"):
        snapshot_materialize(sqlite_store, snapshot_id, tmp_path / "out")


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
class TestAnotherOwner:
    OWNER = 4242

    def _foreign_repo(self, tmp_path: Path) -> Path:
        repo = init_repo(tmp_path / "theirs")
        write(repo, "a.txt", b"theirs\n")
        commit_all(repo)
        for dirpath, dirnames, filenames in os.walk(repo):
            for name in [*dirnames, *filenames]:
                os.lchown(os.path.join(dirpath, name), self.OWNER, self.OWNER)
        os.lchown(repo, self.OWNER, self.OWNER)
        return repo

    def test_root_captures_another_users_repository(
        self, sqlite_store: Store, tmp_path: Path
    ) -> None:
        """git refuses the repository as root by itself ("dubious ownership"), the capture
        succeeds, and no configuration file is written or changed."""
        repo = self._foreign_repo(tmp_path)
        plain = subprocess.run(
            [GIT, "ls-files"], cwd=repo, capture_output=True, text=True, env={"HOME": str(tmp_path)}
        )
        assert plain.returncode != 0
        assert "dubious ownership" in plain.stderr
        config = (repo / ".git" / "config").read_bytes()
        home_config = Path(os.path.expanduser("~")) / ".gitconfig"
        home_before = home_config.read_bytes() if home_config.exists() else None
        result = snapshot_capture(sqlite_store, repo)
        assert result.files == 1
        assert (repo / ".git" / "config").read_bytes() == config
        assert (home_config.read_bytes() if home_config.exists() else None) == home_before

    def test_subdirectory_of_another_users_repository(
        self, sqlite_store: Store, tmp_path: Path
    ) -> None:
        """A capture root below the top level passes the top level as safe.directory."""
        repo = self._foreign_repo(tmp_path)
        write(repo, "d/b.txt", b"b\n")
        os.lchown(repo / "d", self.OWNER, self.OWNER)
        assert snapshot_capture(sqlite_store, repo / "d").files == 1

    def test_ref_capture_of_another_users_repository(
        self, sqlite_store: Store, tmp_path: Path
    ) -> None:
        """A ref capture of a repository root does not own works the same way."""
        repo = self._foreign_repo(tmp_path)
        result = snapshot_capture_ref(sqlite_store, repo, "main", (str(tmp_path),))
        assert result.snapshot_id == snapshot_capture(sqlite_store, repo).snapshot_id
