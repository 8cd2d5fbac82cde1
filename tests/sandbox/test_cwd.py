"""The working directory must be a directory inside the materialized snapshot."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import Runner

pytestmark = pytest.mark.sandbox


def test_cwd_inside_the_snapshot_is_used(run: Runner) -> None:
    """A relative cwd inside the snapshot becomes the probe's working directory."""
    result = run("cat", ["main.txt"], cwd="src")
    assert result.stdout == b"snapshot content\n"


@pytest.mark.parametrize("cwd", ["..", "/", "src/../..", "missing", "src/main.txt"])
def test_escaping_or_invalid_cwd_is_refused(run: Runner, cwd: str) -> None:
    """A cwd that escapes the snapshot, is absolute, missing or a file ends invalid_cwd."""
    result = run("true", cwd=cwd)
    assert (result.status, result.reason) == ("inconclusive", "invalid_cwd")


def test_cwd_through_a_link_out_of_the_snapshot_is_refused(
    run: Runner, snapshot: Path, tmp_path: Path
) -> None:
    """A symlinked directory that leads out of the snapshot ends invalid_cwd."""
    (snapshot / "out").symlink_to(tmp_path)
    result = run("true", cwd="out")
    assert (result.status, result.reason) == ("inconclusive", "invalid_cwd")


def test_surrogate_argument_is_refused(run: Runner) -> None:
    """An argument that is not valid UTF-8 is refused rather than mangled."""
    result = run("printf", ["\udcff"])
    assert (result.status, result.reason) == ("inconclusive", "invalid_argument")
