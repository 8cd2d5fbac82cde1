"""Fixtures for the real-sandbox tests: the verified runtime, a snapshot, a scratch dir."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from probe_service.policies import Policy
from probe_service.sandbox import SandboxResult, SandboxRuntime, run_sandboxed
from probe_service.sandbox.identity import ProbeIdentity, launcher_prefix
from probe_service.sandbox.launch import (
    BWRAP_GUARD_PROOF_ENV,
    SECCOMP_FILTER_ENV,
    Launch,
    build_launch,
)
from probe_service.sandbox.limits import scratch_limits
from probe_service.sandbox.runtime import find_system_tool
from probe_service.sandbox.scratch import scratch_filesystem
from probe_service.sandbox.seccomp import expected_seccomp_filters, write_filter
from probe_service.sandbox.settings import RunPaths, build_settings, write_settings
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
            environment=os.environ,
            policy=policy or make_policy(),
            executable=executable,
            args=list(args),
            runtime=runtime,
            **kw,
        )

    return _run


def canary_launch(
    runtime: SandboxRuntime,
    tmp_path: Path,
    settings_path: Path,
    identity: ProbeIdentity | None,
    probe_env: Mapping[str, str] | None = None,
) -> Launch:
    """A launch of one canary with ``tmp_path``'s snap, scratch and runtime dirs (made here),
    as ``identity`` (None: as the worker itself, the old way) and the snapshot as cwd."""
    for sub in ("rt-home", "rt-tmp", "snap", "scratch"):
        (tmp_path / sub).mkdir(exist_ok=True)
        if identity is not None:
            os.chown(tmp_path / sub, identity.uid, identity.gid)
    prefix: list[str] = []
    if identity is not None:
        unshare, setpriv = find_system_tool("unshare"), find_system_tool("setpriv")
        assert unshare is not None
        assert setpriv is not None
        prefix = launcher_prefix(identity, unshare, setpriv)
    return build_launch(
        settings_path=settings_path,
        node_path=runtime.node_path,
        net_guard_path=runtime.net_guard_path,
        cli_path=runtime.cli_path,
        cwd=tmp_path / "snap",
        runtime_home=tmp_path / "rt-home",
        runtime_tmp=tmp_path / "rt-tmp",
        prefix_argv=[],
        probe_env=dict(probe_env or {}),
        pass_proxy_env=False,
        allowed_ports=(80, 443),
        nonce=secrets.token_hex(16),
        # Unique, as the runner's: a launch without a cgroup is cleaned up by this marker,
        # and a shared one let one test's clean-up kill another worker's canary.
        marker=f"canary-test-{secrets.token_hex(8)}",
        host_prefix=prefix,
        seccomp_filter=_seccomp_filter(tmp_path),
        shm_dir=tmp_path / "scratch",
        seccomp_filters=expected_seccomp_filters(runtime.apply_seccomp_path is not None),
    )


def _seccomp_filter(tmp_path: Path) -> Path:
    target = tmp_path / "seccomp.bpf"
    if not target.exists():
        write_filter(target)
    return target


def canary_paths(tmp_path: Path) -> RunPaths:
    """The run paths ``canary_launch`` makes under ``tmp_path``."""
    return RunPaths(
        tmp_path / "snap", tmp_path / "scratch", tmp_path / "rt-home", tmp_path / "rt-tmp"
    )


def write_canary_settings(
    runtime: SandboxRuntime, tmp_path: Path, launch: Launch
) -> dict[str, Any]:
    """Write the generated settings of the test policy to the launch's settings file."""
    settings = build_settings(make_policy(), runtime, canary_paths(tmp_path), Path("/usr/bin/cat"))
    write_settings(settings, launch.settings_path)
    launch.settings_path.chmod(0o644)
    return settings


def forge_guard_proof(launch: Launch) -> Launch:
    """``launch`` with the bubblewrap guard's proof set in the runtime's own environment, so
    the sandboxed shell starts even where the guard never ran (the runtime's permissive
    fallback then reaches the canary's own checks)."""
    proof = launch.runtime_env[SECCOMP_FILTER_ENV]
    return replace(launch, runtime_env={**launch.runtime_env, BWRAP_GUARD_PROOF_ENV: proof})
