"""A benchmark-only stand-in for the sandbox: it runs nothing and returns a canned result.

It measures the path *around* the sandbox (claim, lease, load, materialize, receipt,
events, finish). It lives here, outside the package, and is installed only by
``patched_sandbox()`` inside a benchmark process: no policy, worker, CLI, host or MCP
face can name or load it (tests/test_bench_standin.py checks the package never refers to
this directory).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from probe_service.plans import execution
from probe_service.sandbox import SandboxResult

_EMPTY = hashlib.sha256(b"").hexdigest()


def canned_result(**_: Any) -> SandboxResult:
    """What a probe of ``/bin/true`` returns, without running anything."""
    return SandboxResult(
        status="ok",
        exit_code=0,
        stdout_sha256=_EMPTY,
        stderr_sha256=_EMPTY,
        sandbox_digest="standin",
        settings_digest="standin",
        probe_elapsed_seconds=0.0,
        phases={"canary": 0.0, "launch": 0.0, "execute": 0.0},
        launcher="standin",
    )


@contextmanager
def patched_sandbox() -> Iterator[None]:
    """Replace the real backend's sandbox call with ``canned_result`` in this process only
    (its run slot, materialization and scratch stay real: they are what is measured)."""
    original = execution.run_sandboxed
    execution.run_sandboxed = canned_result  # type: ignore[assignment]
    try:
        yield
    finally:
        execution.run_sandboxed = original
