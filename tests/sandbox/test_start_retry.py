"""A launch that failed before the sandboxed shell started is launched once more
(docs/ARCHITECTURE.md, "Canary"): nothing of the command ran, so it is safe; a start-up
bound that was spent, a refused start and the runtime's unguarded marker never are.

The race that causes such a failure (a path the runtime saw while wrapping, such as
``/tmp/claude``, removed before bubblewrap binds it; runs' own mounts no longer take part,
"Mount namespaces") cannot be provoked on demand, so the runner tests inject the failure by
replacing the first launch with a command that exits before any marker, and let every
other launch run for real.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from probe_service.sandbox import SandboxRuntime, canary
from probe_service.sandbox.canary import never_started
from probe_service.sandbox.launch import Launch
from probe_service.sandbox.process import Bounded, run_bounded

from .conftest import Runner

pytestmark = pytest.mark.sandbox


class _Launch:
    nonce = "N" * 16
    unguarded_marker = "U" * 16
    unlimited_marker = "L" * 16
    guard_failure = Launch.guard_failure


def _bounded(prefix: bytes, status: str = "ok") -> Bounded:
    return Bounded(status, 1, prefix, b"", b"bwrap: failed", 0.01)


@pytest.mark.parametrize(
    ("prefix", "status", "expected"),
    [
        (b"", "ok", True),  # bubblewrap exited before the shell printed anything
        (b"bwrap: Can't", "ok", True),  # its own message where the marker belongs
        (b"N" * 16, "ok", False),  # the command started
        (b"U" * 16, "ok", False),  # the runtime ran unguarded: a finding, never retried
        (b"L" * 16, "ok", False),  # bubblewrap ran without our guard: a finding too
        (b"", "start_timeout", False),  # the start-up bound is spent
        (b"", "start_failed", False),  # the start hook refused the command
    ],
)
def test_which_failures_are_launched_again(prefix: bytes, status: str, expected: bool) -> None:
    assert never_started(_bounded(prefix, status), _Launch()) is expected  # type: ignore[arg-type]


def _fail_first(monkeypatch: pytest.MonkeyPatch, module: Any) -> list[Sequence[str]]:
    """The first launch through ``module`` runs ``/bin/false`` in place of the sandbox."""
    calls: list[Sequence[str]] = []

    def patched(argv: Sequence[str], **kw: Any) -> Bounded:
        calls.append(argv)
        return run_bounded(["/bin/false"] if len(calls) == 1 else argv, **kw)

    monkeypatch.setattr(module, "run_bounded", patched)
    return calls


def _without_secret(argv: Sequence[str]) -> list[str]:
    """``argv`` with the canary's fresh secret directory (one per launch) masked."""
    return [re.sub(r"byte-probe-canary-[^/]*/", "SECRET/", word) for word in argv]


def test_a_probe_launch_that_never_started_is_launched_once_more(
    run: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe's launch (its canary inside) failed before its shell: launched again, the
    same launch but for the canary's fresh secret."""
    calls = _fail_first(monkeypatch, canary)
    result = run("sh", ["-c", "echo hello"])
    assert (result.status, result.stdout) == ("ok", b"hello\n")
    assert len(calls) == 2
    assert _without_secret(calls[0]) == _without_secret(calls[1])


def test_a_canary_that_never_started_is_launched_once_more(
    run: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first launch of a run with a preflight command carries the first canary: it is
    launched once more, then the probe's launch (with its own canary) runs."""
    calls = _fail_first(monkeypatch, canary)
    result = run("sh", ["-c", "echo hello"], preflight=[["true"]])
    assert (result.status, result.stdout) == ("ok", b"hello\n")
    assert len(calls) == 3


def test_a_second_failure_ends_sandbox_failed(
    run: Runner, monkeypatch: pytest.MonkeyPatch, runtime: SandboxRuntime, tmp_path: Path
) -> None:
    calls: list[Sequence[str]] = []

    def always_fails(argv: Sequence[str], **kw: Any) -> Bounded:
        calls.append(argv)
        return run_bounded(["/bin/false"], **kw)

    monkeypatch.setattr(canary, "run_bounded", always_fails)
    result = run("sh", ["-c", "echo hello"])
    assert (result.status, result.reason) == ("inconclusive", "sandbox_failed")
    assert len(calls) == 2  # once more, never a loop
