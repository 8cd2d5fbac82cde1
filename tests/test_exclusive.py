"""The `exclusive` tests (tests/conftest.py, EXCLUSIVE_PATHS) never run beside another test.

`make test` runs everything else on several processes, then these one at a time. An
exclusive test started beside other xdist workers would fill the host-wide tables their runs
need, or meet theirs full, and pass or fail by luck; so it fails at once instead.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .conftest import EXCLUSIVE_PATHS, SLOW_PATHS

REPO = Path(__file__).resolve().parents[1]
ONE_ATTACK = "tests/security/test_links.py::test_internal_relative_links_are_kept"


def _pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=REPO,
        env={**os.environ, "PYTEST_ADDOPTS": f"--basetemp={tmp_path / 'inner'}"},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def test_an_exclusive_test_beside_other_workers_fails_naming_the_rule(tmp_path: Path) -> None:
    done = _pytest(tmp_path, "-n", "2", ONE_ATTACK)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{ONE_ATTACK} is marked exclusive and must run alone" in done.stdout
    assert "1 error" in done.stdout  # refused in set-up, before any fixture ran


def test_the_exclusive_pass_selects_the_attacks_and_nothing_else(tmp_path: Path) -> None:
    done = _pytest(tmp_path, "--collect-only", "-m", "exclusive", "tests/security", "tests/sandbox")
    assert done.returncode == 0, done.stdout + done.stderr
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    assert ONE_ATTACK in ids
    assert all(line.startswith(EXCLUSIVE_PATHS) for line in ids)


def test_every_exclusive_test_is_slow_so_the_quick_loop_never_meets_one() -> None:
    assert all(path.startswith(SLOW_PATHS) for path in EXCLUSIVE_PATHS)
