"""``check_readable``: a capture for another user opens every path as that user, and the
inode it opened must be the one scanned (docs/ARCHITECTURE.md, "Local service")."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from probe_service.errors import UnsafePath, UnstableWorkingTree
from probe_service.snapshot.as_reader import Reader, check_readable
from probe_service.snapshot.reader import stat_key

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="reading as another uid needs root")

NOBODY = Reader(uid=65534, gid=65534)


@pytest.fixture
def tree() -> Iterator[Path]:
    """A world-readable tree under a directory every user may traverse."""
    base = Path(tempfile.mkdtemp(prefix="as-reader-", dir="/tmp"))
    base.chmod(0o755)
    try:
        (base / "src").mkdir(mode=0o755)
        (base / "src" / "a.py").write_text("a = 1\n")
        (base / "src" / "a.py").chmod(0o644)
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _stats(root: Path, *paths: str) -> dict[str, tuple[int, int, int, int, int]]:
    return {p: stat_key(os.lstat(root / p)) for p in paths}


def test_a_readable_tree_passes(tree: Path) -> None:
    """Every file and link directory the caller may open: no refusal."""
    (tree / "link").symlink_to("src/a.py")
    check_readable(NOBODY, str(tree), _stats(tree, "src/a.py"), ["link"])


def test_an_unreadable_file_is_named(tree: Path) -> None:
    """A 0600 root file is refused, naming it and the uid."""
    (tree / "src" / "a.py").chmod(0o600)
    with pytest.raises(UnsafePath, match=r"'src/a.py' is not readable by uid 65534"):
        check_readable(NOBODY, str(tree), _stats(tree, "src/a.py"), [])


def test_a_directory_the_caller_may_not_list_is_refused(tree: Path) -> None:
    """A directory searchable but not readable (0711) is refused for its files too."""
    (tree / "src").chmod(0o711)
    with pytest.raises(UnsafePath, match="not readable by uid 65534"):
        check_readable(NOBODY, str(tree), _stats(tree, "src/a.py"), [])


def test_the_groups_given_are_the_ones_used(tree: Path) -> None:
    """A file readable through a group is readable with that group, not without it."""
    target = tree / "src" / "a.py"
    os.chown(target, 0, 4242)
    target.chmod(0o640)
    stats = _stats(tree, "src/a.py")
    check_readable(Reader(uid=65534, gid=65534, groups=(4242,)), str(tree), stats, [])
    with pytest.raises(UnsafePath):
        check_readable(NOBODY, str(tree), stats, [])


def test_a_file_replaced_after_the_scan_is_unstable(tree: Path) -> None:
    """The inode opened must be the one scanned: a swapped file makes the capture retry."""
    stats = _stats(tree, "src/a.py")
    (tree / "src" / "a.py").unlink()
    (tree / "src" / "a.py").write_text("other\n")
    (tree / "src" / "a.py").chmod(0o644)
    with pytest.raises(UnstableWorkingTree, match=r"src/a\.py"):
        check_readable(NOBODY, str(tree), stats, [])
