"""Refusals before the embedded store opens (seed 000, "Durable data")."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from probe_service.errors import UnsafePath
from probe_service.store import DB_FILENAME, open_store


def _db(root: Path) -> Path:
    return root / ".zyte" / DB_FILENAME


class TestStateDirectory:
    def test_creates_deny_all_gitignore(self, repo: Path) -> None:
        """Opening the store writes .zyte/.gitignore containing '*'."""
        open_store(repo).close()
        assert (repo / ".zyte" / ".gitignore").read_text() == "*\n"

    def test_never_creates_root_gitignore(self, repo: Path) -> None:
        """The repository's own .gitignore is never created."""
        open_store(repo).close()
        assert not (repo / ".gitignore").exists()

    def test_never_edits_root_gitignore(self, repo: Path) -> None:
        """An existing root .gitignore keeps its bytes."""
        (repo / ".gitignore").write_text("build/\n")
        open_store(repo).close()
        assert (repo / ".gitignore").read_text() == "build/\n"

    def test_symlinked_state_dir_refused(self, repo: Path, tmp_path: Path) -> None:
        """A .zyte that is a symbolic link is refused, naming the path."""
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        (repo / ".zyte").symlink_to(elsewhere)
        with pytest.raises(UnsafePath, match=r"\.zyte.*symbolic link"):
            open_store(repo)
        assert not (elsewhere / DB_FILENAME).exists()

    def test_state_dir_that_is_a_file_refused(self, repo: Path) -> None:
        """A .zyte that is a regular file is refused."""
        (repo / ".zyte").write_text("x")
        with pytest.raises(UnsafePath, match="not a directory"):
            open_store(repo)

    def test_symlinked_gitignore_refused(self, repo: Path, tmp_path: Path) -> None:
        """A .zyte/.gitignore that is a link is refused rather than written through."""
        target = tmp_path / "target"
        target.write_text("keep")
        (repo / ".zyte").mkdir()
        (repo / ".zyte" / ".gitignore").symlink_to(target)
        with pytest.raises(UnsafePath, match="gitignore"):
            open_store(repo)
        assert target.read_text() == "keep"


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm", "-journal"])
class TestDatabaseFiles:
    def test_symlink_refused(self, repo: Path, tmp_path: Path, suffix: str) -> None:
        """A database or sidecar path that is a symbolic link is refused."""
        (repo / ".zyte").mkdir()
        target = tmp_path / "target"
        target.write_bytes(b"")
        Path(f"{_db(repo)}{suffix}").symlink_to(target)
        with pytest.raises(UnsafePath, match=f"{DB_FILENAME}{suffix}: .*symbolic link"):
            open_store(repo)

    def test_non_regular_refused(self, repo: Path, suffix: str) -> None:
        """A database or sidecar path that is a FIFO is refused."""
        (repo / ".zyte").mkdir()
        os.mkfifo(f"{_db(repo)}{suffix}")
        with pytest.raises(UnsafePath, match="not a regular file"):
            open_store(repo)

    def test_hard_link_refused(self, repo: Path, tmp_path: Path, suffix: str) -> None:
        """A database or sidecar path with a second hard link is refused."""
        (repo / ".zyte").mkdir()
        outside = tmp_path / "outside"
        outside.write_bytes(b"")
        os.link(outside, f"{_db(repo)}{suffix}")
        with pytest.raises(UnsafePath, match="2 hard links"):
            open_store(repo)
