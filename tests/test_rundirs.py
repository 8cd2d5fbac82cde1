"""Run directories name their creator, and a dead creator's directories are swept."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from probe_service.rundirs import RUN_DIR_PREFIX, make_run_dir, sweep_stale_run_dirs
from probe_service.sandbox.identity import PROBE_UID_BASE


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temp dir of this test's own (other runs share /tmp)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def _dead_pid() -> int:
    child = subprocess.Popen(["/bin/true"])
    child.wait()
    return child.pid


def test_run_dir_names_its_process_and_only_its_slot_may_traverse_it(private_tmp: Path) -> None:
    """A run directory is root:<slot gid> 0710 and carries the creating process's pid."""
    run_dir = make_run_dir(PROBE_UID_BASE + 7)
    assert run_dir.name.startswith(f"{RUN_DIR_PREFIX}{os.getpid()}-")
    info = run_dir.stat()
    assert (info.st_mode & 0o777, info.st_uid, info.st_gid) == (0o710, 0, PROBE_UID_BASE + 7)


def test_dead_workers_directories_are_swept_live_ones_kept(private_tmp: Path) -> None:
    """A SIGKILLed worker's directory (deep, read-only inside) goes; a live one's stays."""
    dead = private_tmp / f"{RUN_DIR_PREFIX}{_dead_pid()}-abc"
    deep = dead.joinpath(*["d"] * 300)
    deep.mkdir(parents=True)
    (dead / "d").chmod(0o500)
    live = make_run_dir(PROBE_UID_BASE)
    other = private_tmp / "byte-probe-run-unowned"
    other.mkdir()
    assert sweep_stale_run_dirs() == 1
    assert not dead.exists()
    assert live.exists()
    assert other.exists()
