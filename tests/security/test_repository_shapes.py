"""F16, F17: repository shapes that crashed capture or materialize, or were captured and then
refused.

Before: a repository 1,000 directories deep broke materialize with RecursionError, and a
file name with a backslash was captured and then refused by ``snapshot show`` and
``run``. Now capture asks the same name rule materialize asks (one function, one
message), paths are bounded to MAX_PATH_DEPTH components, and every walk is iterative.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from sqlalchemy import func, insert, select

from probe_service.cli import main
from probe_service.errors import UnsafePath
from probe_service.fstree import remove_tree
from probe_service.relpaths import MAX_PATH_DEPTH
from probe_service.snapshot import Entry
from probe_service.snapshot.manifest import encode_manifest
from probe_service.store import Store
from probe_service.store.schema import snapshots

from .. import calls as service
from .attacks import RunProbe, leftovers

pytestmark = pytest.mark.sandbox


def _forge(store: Store, paths: list[str]) -> str:
    """Store a manifest naming ``paths`` (as a tampered store or another tool might)."""
    snapshot_id, blob = encode_manifest([Entry(path=p, kind="symlink", target="x") for p in paths])
    with store.transaction() as conn:
        conn.execute(
            insert(snapshots).values(
                snapshot_id=snapshot_id, manifest=blob, files=0, bytes=0, created_at="x"
            )
        )
    return snapshot_id


def _snapshot_rows(store: Store) -> int:
    with store.reading() as conn:
        return int(conn.execute(select(func.count()).select_from(snapshots)).scalar_one())


def _deep_file(repo: Path, depth: int) -> str:
    """Create ``d/d/.../f`` with ``depth`` components; return its relative path."""
    rel = "/".join(["d"] * (depth - 1) + ["f"])
    fd = os.open(repo, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth - 1):  # relative steps: the absolute path may pass PATH_MAX
        os.mkdir("d", dir_fd=fd)
        child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    os.close(os.open("f", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    os.close(fd)
    return rel


class TestNames:
    def test_backslash_name_refused_at_capture_in_materialize_words(
        self, sqlite_store: Store, repo: Path
    ) -> None:
        """Capture refuses `a\\b` with exactly the message materialize gives; no row written."""
        (repo / "a\\b").write_text("x")
        with pytest.raises(UnsafePath) as at_capture:
            service.snapshot_capture(sqlite_store, repo)
        assert _snapshot_rows(sqlite_store) == 0
        forged = _forge(sqlite_store, ["a\\b"])
        with pytest.raises(UnsafePath) as at_materialize:
            service.snapshot_materialize(sqlite_store, forged, repo.parent / "out")
        assert str(at_capture.value) == str(at_materialize.value)
        assert "contains a backslash" in str(at_capture.value)

    def test_cli_capture_refusal_is_one_line(
        self, capsys: pytest.CaptureFixture[str], repo: Path, tmp_path: Path
    ) -> None:
        """`snapshot capture` of such a tree: non-zero exit, one line, no traceback."""
        (repo / "a\\b").write_text("x")
        code = main(["snapshot", "capture", str(repo), "--root", str(tmp_path)])
        _, err = capsys.readouterr()
        assert code != 0
        assert len(err.strip().splitlines()) == 1
        assert "backslash" in err
        assert "Traceback" not in err


class TestDepth:
    @pytest.mark.parametrize("use_git", [False, True], ids=["walk", "git"])
    def test_thousand_deep_repository_refused_naming_the_limit(
        self, sqlite_store: Store, repo: Path, use_git: bool
    ) -> None:
        """A file 1,000 directories deep: a typed refusal naming the limit, no crash, no row."""
        _deep_file(repo, 1000)
        try:
            if use_git:
                subprocess.run(["git", "init", "-q", str(repo)], check=True)
            with pytest.raises(UnsafePath, match=f"over the limit of {MAX_PATH_DEPTH}"):
                service.snapshot_capture(sqlite_store, repo)
            assert _snapshot_rows(sqlite_store) == 0
        finally:
            # pytest's own clean-up of old temp dirs recurses; never leave it this depth.
            remove_tree(repo / "d")

    def test_forged_deep_manifest_refused_by_materialize(
        self, sqlite_store: Store, tmp_path: Path
    ) -> None:
        """A stored manifest 1,000 deep is refused by show and materialize, naming the limit."""
        forged = _forge(sqlite_store, ["/".join(["d"] * 1000)])
        with pytest.raises(UnsafePath, match=f"over the limit of {MAX_PATH_DEPTH}"):
            service.snapshot_get(sqlite_store, forged)
        with pytest.raises(UnsafePath, match=f"over the limit of {MAX_PATH_DEPTH}"):
            service.snapshot_materialize(sqlite_store, forged, tmp_path / "out")

    def test_deepest_allowed_repository_runs(
        self, run_probe: RunProbe, sqlite_store: Store, repo: Path, run_tmp: Path
    ) -> None:
        """A file exactly MAX_PATH_DEPTH components deep is captured, materialized and read."""
        rel = _deep_file(repo, MAX_PATH_DEPTH)
        (repo / rel).write_text("deepest\n")
        snapshot_id = service.snapshot_capture(sqlite_store, repo).snapshot_id
        result = run_probe(snapshot_id, "cat", [rel])
        assert (result.status, result.exit_code, result.stdout) == ("ok", 0, "deepest\n")
        assert result.outcome == "supports"
        assert leftovers(run_tmp) == []
