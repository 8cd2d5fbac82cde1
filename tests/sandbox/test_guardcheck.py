"""The start-up attack on the guard's limits fails when a limit does not hold."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from probe_service.errors import SandboxUnavailable
from probe_service.sandbox import SandboxRuntime
from probe_service.sandbox.canary import limits_problems
from probe_service.sandbox.guardcheck import check_guarded_launch

pytestmark = pytest.mark.sandbox


def _with_guard(runtime: SandboxRuntime, tmp_path: Path, body: str) -> SandboxRuntime:
    guard = tmp_path / "guard.sh"
    guard.write_text(f"#!/bin/sh\n{body}\n")
    guard.chmod(0o755)
    return dataclasses.replace(runtime, bwrap_guard_path=guard)


def test_the_real_guard_passes(runtime: SandboxRuntime) -> None:
    """Through sandbox/bwrap-guard.sh every attack is stopped."""
    check_guarded_launch(runtime)


def test_a_guard_that_only_runs_bwrap_fails_every_check(
    runtime: SandboxRuntime, tmp_path: Path
) -> None:
    """Plain bubblewrap (what the runtime would run without our bwrapPath): AIO, /tmp, /dev,
    /dev/shm and the pty are all named."""
    assert runtime.bwrap_path is not None
    plain = _with_guard(runtime, tmp_path, f'exec {runtime.bwrap_path} "$@"')
    with pytest.raises(SandboxUnavailable) as caught:
        check_guarded_launch(plain)
    assert caught.value.reason == "limits_unverified"
    for named in ("io_setup", "/tmp", "/dev was", "/dev/shm", "pseudo-terminal"):
        assert named in str(caught.value)


def test_a_guard_without_the_filter_fails(runtime: SandboxRuntime, tmp_path: Path) -> None:
    """The real guard given an empty filter (no program): the launch fails, named."""
    assert runtime.bwrap_guard_path is not None
    empty = tmp_path / "empty.bpf"
    empty.write_bytes(b"")
    body = f'BYTE_PROBE_SECCOMP_FILTER={empty} exec {runtime.bwrap_guard_path} "$@"'
    with pytest.raises(SandboxUnavailable) as caught:
        check_guarded_launch(_with_guard(runtime, tmp_path, body))
    assert caught.value.reason == "limits_unverified"


class TestCanaryReport:
    """The host-side reading of the canary's limit lines fails closed."""

    def test_a_clean_report_passes(self) -> None:
        """No writable place and the expected filter count: no problem."""
        assert limits_problems({"seccomp_filters": ["2"]}, 2) == []

    def test_a_writable_place_is_named(self) -> None:
        """A top-level directory that took a file is a problem, named."""
        report = {"seccomp_filters": ["2"], "writable": ["/tmp"]}
        assert limits_problems(report, 2) == ["/tmp is writable"]

    def test_a_missing_or_other_filter_count_is_a_problem(self) -> None:
        """One filter fewer (ours missing) or no line at all is refused."""
        assert limits_problems({"seccomp_filters": ["1"]}, 2) != []
        assert limits_problems({}, 2) != []
