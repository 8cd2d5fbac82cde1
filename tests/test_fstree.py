"""fstree: iterative, link-safe removal of probe-shaped trees."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from probe_service.fstree import discard_tree, remove_tree


def _chain(root: Path, depth: int, name: str = "d") -> None:
    """A ``depth``-deep directory chain built by relative steps (no PATH_MAX)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for level in range(depth):
        os.mkdir(name, dir_fd=fd)
        child = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
        if level % 50 == 0:
            os.close(os.open("f", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    os.close(fd)


class TestRemoveTree:
    def test_chain_deeper_than_the_recursion_limit_and_path_max(self, tmp_path: Path) -> None:
        """A chain deeper than the recursion limit, with paths past PATH_MAX, is removed."""
        root = tmp_path / "run"
        root.mkdir()
        depth = sys.getrecursionlimit() * 2
        _chain(root, depth, name="d" * 8)  # 2,000 x 9 bytes: far past PATH_MAX
        remove_tree(root)
        assert not root.exists()

    def test_read_only_and_unreadable_directories(self, tmp_path: Path) -> None:
        """Directories left read-only or mode 000 are made removable, then removed."""
        root = tmp_path / "run"
        (root / "a" / "b").mkdir(parents=True)
        (root / "a" / "b" / "f").write_text("x")
        (root / "a" / "b").chmod(0o500)
        (root / "a").chmod(0o000)
        remove_tree(root)
        assert not root.exists()

    def test_links_are_removed_never_followed(self, tmp_path: Path) -> None:
        """A link to an outside directory is removed; the directory and its files stay."""
        outside = tmp_path / "outside"
        outside.mkdir()
        (outside / "keep").write_text("keep")
        root = tmp_path / "run"
        root.mkdir()
        (root / "to-dir").symlink_to(outside)
        (root / "to-file").symlink_to(outside / "keep")
        remove_tree(root)
        assert not root.exists()
        assert (outside / "keep").read_text() == "keep"

    def test_link_as_root_is_unlinked(self, tmp_path: Path) -> None:
        """When the path itself is a link, only the link goes."""
        outside = tmp_path / "outside"
        outside.mkdir()
        (outside / "keep").write_text("keep")
        (tmp_path / "link").symlink_to(outside)
        remove_tree(tmp_path / "link")
        assert not os.path.lexists(tmp_path / "link")
        assert (outside / "keep").exists()

    def test_missing_path_is_not_an_error(self, tmp_path: Path) -> None:
        """Removing what is already gone succeeds (a finally may run twice)."""
        remove_tree(tmp_path / "absent")
        assert discard_tree(tmp_path / "absent")

    def test_discard_logs_instead_of_raising(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A removal that fails is reported as False, never raised into a finally."""

        def refuse(*_args: object, **_kwargs: object) -> None:
            raise PermissionError(13, "refused")

        root = tmp_path / "run"
        root.mkdir()
        monkeypatch.setattr(os, "rmdir", refuse)
        assert discard_tree(root) is False
