"""Fixtures for the real-sandbox tests: the verified runtime, a snapshot, a scratch dir."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from probe_service.policies import Policy
from probe_service.sandbox import SandboxResult, SandboxRuntime, run_sandboxed
from probe_service.sandbox.limits import scratch_limits
from probe_service.sandbox.scratch import scratch_filesystem
from probe_service.sandbox.slots import RunSlot, default_slots

SHELL_TOOLS = ("true", "cat", "sh", "echo", "printf", "ls", "python3", "sleep")


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    """A materialized snapshot with one source file."""
    root = tmp_path / "snapshot"
    (root / "src").mkdir(parents=True)
    (root / "src" / "main.txt").write_text("snapshot content\n")
    return root


@pytest.fixture
def slot() -> Iterator[RunSlot]:
    """A run slot held for the test, as the plan runner holds one for a run: the test's
    scratch is mounted in its private mount namespace and every ``run`` goes into it."""
    with default_slots().acquire() as held:
        yield held


@pytest.fixture
def scratch(tmp_path: Path, slot: RunSlot) -> Iterator[Path]:
    """A scratch filesystem mounted for the test in its slot's namespace, so its files
    outlive the run; the test reads them through ``slot.view(scratch)``.

    Its limits are the defaults of a policy that sets none; a test of a smaller
    scratch allowance passes an empty ``scratch_dir`` and lets the runner mount it.
    """
    root = tmp_path / "scratch"
    root.mkdir()
    with scratch_filesystem(root, scratch_limits(make_policy()), slot.namespace):
        yield root


def make_policy(**overrides: Any) -> Policy:
    """A permissive-enough test policy; override any field."""
    fields: dict[str, Any] = {
        "id": "test-shell",
        "allowed_executables": list(SHELL_TOOLS),
        "timeout_seconds": 20,
        "max_output_bytes": 100_000,
        "allowed_domains": [],
        "environment": ["PATH", "LANG"],
    }
    fields.update(overrides)
    if "sh" in fields["allowed_executables"]:
        fields.setdefault("executable_pins", {"sh": "/usr/bin/dash"})
    return Policy.model_validate(fields)


Runner = Callable[..., SandboxResult]


@pytest.fixture
def run(runtime: SandboxRuntime, snapshot: Path, scratch: Path, slot: RunSlot) -> Runner:
    """Run an executable with the test policy, the snapshot and the scratch dir, in the
    test's run slot."""

    def _run(
        executable: str, args: Sequence[str] = (), policy: Policy | None = None, **kw: Any
    ) -> SandboxResult:
        kw.setdefault("snapshot_dir", snapshot)
        kw.setdefault("scratch_dir", scratch)
        kw.setdefault("slot", slot)
        return run_sandboxed(
            policy=policy or make_policy(),
            executable=executable,
            args=list(args),
            runtime=runtime,
            **kw,
        )

    return _run
