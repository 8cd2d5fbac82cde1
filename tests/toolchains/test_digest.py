"""The toolchain content digest: what it covers, what it refuses, and its stat cache."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from probe_service.errors import PolicyError
from probe_service.toolchains import ToolchainDigester


def _digester() -> ToolchainDigester:
    """A fresh digester that caches every file (no racy window: the tests change files
    on purpose and check that the stat identity, ctime included, catches it)."""
    return ToolchainDigester(racy_window_ns=0)


class TestCoverage:
    def test_same_tree_same_digest(self, tree: Path) -> None:
        """Digesting an unchanged tree twice gives the same digest."""
        assert _digester().digest(tree).sha256 == _digester().digest(tree).sha256

    @pytest.mark.parametrize(
        "change",
        ["content", "mode", "rename", "new_file", "new_dir", "relink"],
    )
    def test_every_change_changes_the_digest(self, tree: Path, change: str) -> None:
        """Content, mode, names, new entries and link targets all count."""
        before = _digester().digest(tree).sha256
        helper = tree / "lib" / "helper.py"
        if change == "content":
            helper.write_text("VALUE = 43\n")  # same size, other bytes
        elif change == "mode":
            helper.chmod(0o600)
        elif change == "rename":
            helper.rename(tree / "lib" / "helper2.py")
        elif change == "new_file":
            (tree / "lib" / "extra.pth").write_text("")
        elif change == "new_dir":
            (tree / "lib" / "pkg").mkdir()
        else:
            (tree / "bin" / "python").unlink()
            (tree / "bin" / "python").symlink_to("/usr/bin/python3")
        assert _digester().digest(tree).sha256 != before

    def test_base_interpreter_identity_is_covered(self, tree: Path, tmp_path: Path) -> None:
        """A link out of the tree records its target's path and SHA-256, in the digest too."""
        interpreter = tmp_path / "base-python"
        interpreter.write_bytes(b"interpreter v1")
        (tree / "bin" / "python").unlink()
        (tree / "bin" / "python").symlink_to(interpreter)
        first = _digester().digest(tree)
        assert [(t.link, t.path) for t in first.external] == [("bin/python", str(interpreter))]
        interpreter.write_bytes(b"interpreter v2")
        second = _digester().digest(tree)
        assert second.external[0].sha256 != first.external[0].sha256
        assert second.sha256 != first.sha256


class TestRefusals:
    def test_world_writable_entry_is_refused_naming_it(self, tree: Path) -> None:
        """A file others may write would let them change what probes run: refused."""
        (tree / "lib" / "helper.py").chmod(0o666)
        with pytest.raises(PolicyError, match=r"lib/helper.py is group- or world-writable"):
            _digester().digest(tree)

    @pytest.mark.parametrize("entry", ["lib/helper.py", "lib"])
    def test_entry_owned_by_another_user_is_refused_naming_it(self, tree: Path, entry: str) -> None:
        """A file or directory another uid owns (a tarball extracted as root keeps its
        uids) lets that user rewrite the toolchain under a recorded digest: refused."""
        os.chown(tree / entry, 1000, 1000)
        with pytest.raises(PolicyError, match=rf"{entry} is owned by uid 1000"):
            _digester().digest(tree)

    def test_special_file_is_refused_naming_it(self, tree: Path) -> None:
        """A FIFO (or device, socket) in a toolchain is refused."""
        os.mkfifo(tree / "lib" / "pipe")
        with pytest.raises(PolicyError, match=r"lib/pipe is not a file or directory"):
            _digester().digest(tree)

    def test_unreadable_entries_are_reported(self, tree: Path) -> None:
        """Entries the probe uids cannot read are listed for ``policy check``."""
        (tree / "lib" / "helper.py").chmod(0o600)
        assert _digester().digest(tree).unreadable == ("lib/helper.py",)


class TestStatCache:
    def test_unchanged_tree_is_not_read_again(self, tree: Path) -> None:
        """The second digest of an unchanged tree hashes no file."""
        digester = _digester()
        first = digester.digest(tree)
        hashed = digester.hashed_files
        assert digester.digest(tree).sha256 == first.sha256
        assert digester.hashed_files == hashed

    def test_a_rewritten_file_is_read_again(self, tree: Path) -> None:
        """A same-size rewrite with the old mtime restored is still caught (ctime moved)."""
        digester = _digester()
        helper = tree / "lib" / "helper.py"
        first = digester.digest(tree)
        info = helper.stat()
        helper.write_text("VALUE = 43\n")
        os.utime(helper, ns=(info.st_atime_ns, info.st_mtime_ns))
        assert digester.digest(tree).sha256 != first.sha256

    def test_recent_files_are_never_cached(self, tree: Path) -> None:
        """With the default racy window, files changed just now are hashed every time."""
        digester = ToolchainDigester()
        digester.digest(tree)
        hashed = digester.hashed_files
        digester.digest(tree)
        assert digester.hashed_files > hashed
