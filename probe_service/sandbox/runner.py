"""``run_sandboxed``: one probe, under one policy, through the verified runtime.

Architecture: "Nothing runs unsandboxed, ever. Every failure of a prerequisite
ends in ``inconclusive`` with a machine-readable reason, never in a fallback."
So this module converts every refusal into a result and never raises for them.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from probe_service.errors import ProbeServiceError, SandboxUnavailable
from probe_service.fstree import discard_tree, tree_usage
from probe_service.policies.executables import (
    ExecutableChanged,
    ExecutableIdentity,
    ExecutableNotAllowed,
    capture_identity,
    recheck_identity,
    resolve_executable,
)
from probe_service.policies.model import Policy
from probe_service.sandbox.argsize import MAX_LAUNCH_ARG_BYTES, launch_arg_bytes
from probe_service.sandbox.canary import run_canary
from probe_service.sandbox.launch import Launch, build_launch
from probe_service.sandbox.limits import (
    RUNTIME_MEMORY_OVERHEAD,
    RUNTIME_TASK_OVERHEAD,
    RunCgroup,
    create_run_cgroup,
    drop_privileges_argv,
    plan_limits,
    prlimit_argv,
)
from probe_service.sandbox.process import Bounded, run_bounded
from probe_service.sandbox.results import LimitsApplied, SandboxResult
from probe_service.sandbox.runtime import SandboxRuntime, find_system_tool, verify_unchanged
from probe_service.sandbox.settings import RunPaths, build_settings, write_settings

__all__ = ["Refused", "run_canary", "run_sandboxed"]


class Refused(ProbeServiceError):
    """Internal signal: stop before launch with an ``inconclusive`` reason."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


@dataclass(frozen=True)
class _Prepared:
    executable: ExecutableIdentity
    paths: RunPaths
    cwd: Path


def _canonical_dir(path: Path, what: str) -> Path:
    real = Path(os.path.realpath(path))
    if not real.is_dir():
        raise Refused("sandbox_failed", f"{what} {path} is not a directory")
    return real


def _resolve_cwd(snapshot: Path, cwd: str) -> Path:
    # seed 000: an invalid working directory returns inconclusive.
    if "\x00" in cwd or os.path.isabs(cwd):
        raise Refused("invalid_cwd", f"cwd {cwd!r} must be relative to the snapshot")
    target = Path(os.path.realpath(snapshot / cwd))
    if not (target == snapshot or snapshot in target.parents) or not target.is_dir():
        raise Refused("invalid_cwd", f"cwd {cwd!r} is not a directory inside the snapshot")
    return target


def _prepare(
    policy: Policy,
    executable: str,
    args: Sequence[str],
    dirs: tuple[Path, Path, Path],
    cwd: str,
    forbidden: Sequence[Path],
) -> _Prepared:
    snapshot_dir, scratch_dir, run_dir = dirs
    if any("\x00" in arg for arg in args):
        raise Refused("invalid_argument", "an argument contains a NUL byte")
    try:
        # srt is a Node program: its argv must be valid UTF-8 to arrive intact.
        [arg.encode("utf-8") for arg in args]
    except UnicodeEncodeError as exc:
        raise Refused("invalid_argument", "an argument is not valid UTF-8") from exc
    if launch_arg_bytes(args) > MAX_LAUNCH_ARG_BYTES:
        # Past it the launch fails with E2BIG: refuse, never report sandbox_failed.
        raise Refused(
            "invalid_argument", f"args exceed the {MAX_LAUNCH_ARG_BYTES}-byte launch limit"
        )
    snapshot = _canonical_dir(snapshot_dir, "snapshot")
    scratch = _canonical_dir(scratch_dir, "scratch")
    if snapshot == scratch or snapshot in scratch.parents or scratch in snapshot.parents:
        # Overlap would make the source writable or the scratch read-only.
        raise Refused("sandbox_failed", "snapshot and scratch directories overlap")
    work_dir = _resolve_cwd(snapshot, cwd)
    roots = [snapshot, scratch, *forbidden]
    try:
        resolved = resolve_executable(policy, executable, roots)
        identity = capture_identity(resolved)
    except ExecutableNotAllowed as exc:
        raise Refused("executable_not_allowed", str(exc)) from exc
    except ProbeServiceError as exc:
        raise Refused("executable_unresolved", str(exc)) from exc
    (run_dir / "home").mkdir()
    (run_dir / "tmp").mkdir()
    paths = RunPaths(snapshot, scratch, run_dir / "home", run_dir / "tmp")
    return _Prepared(identity, paths, work_dir)


def _probe_env(policy: Policy, scratch: Path) -> dict[str, str]:
    # seed 000: a stripped environment -- exactly the names the policy lists,
    # with the worker's values, plus our scratch-pointing names.
    env = {name: os.environ[name] for name in policy.environment if name in os.environ}
    for sub in ("home", "tmp"):
        (scratch / sub).mkdir(exist_ok=True)
    env.update(BYTE_PROBE_SCRATCH=str(scratch), HOME=str(scratch / "home"))
    env["TMPDIR"] = str(scratch / "tmp")
    return env


def _system_tool(name: str) -> Path:
    found = find_system_tool(name)
    if found is None:
        raise Refused("sandbox_prerequisite_missing", f"{name} not in fixed system directories")
    return found


def _prefix_argv(policy: Policy, limits: LimitsApplied) -> list[str]:
    if policy.max_processes is not None and limits.max_processes is None:
        raise Refused(
            "sandbox_prerequisite_missing",
            "max_processes cannot be enforced for a root worker without a writable cgroup",
        )
    argv = prlimit_argv(_system_tool("prlimit"), limits)
    if os.geteuid() == 0:
        argv += drop_privileges_argv(_system_tool("setpriv"))
    return argv


def _make_launch(
    policy: Policy,
    runtime: SandboxRuntime,
    prepared: _Prepared,
    run_dir: Path,
    limits: LimitsApplied,
) -> tuple[Launch, str]:
    settings = build_settings(policy, runtime, prepared.paths, Path(prepared.executable.path))
    digest = write_settings(settings, run_dir / "settings.json")
    probe_env = _probe_env(policy, prepared.paths.scratch)
    prefix = _prefix_argv(policy, limits)
    launch = build_launch(
        settings_path=run_dir / "settings.json",
        node_path=runtime.node_path,
        cli_path=runtime.cli_path,
        cwd=prepared.cwd,
        runtime_home=prepared.paths.runtime_home,
        runtime_tmp=prepared.paths.runtime_tmp,
        prefix_argv=prefix,
        probe_env=probe_env,
        pass_proxy_env=bool(policy.allowed_domains),
        nonce=secrets.token_hex(16),
        marker=run_dir.name,
    )
    return launch, digest


@contextmanager
def _run_resources(policy: Policy) -> Iterator[tuple[Path, RunCgroup | None, LimitsApplied]]:
    run_dir = Path(tempfile.mkdtemp(prefix="byte-probe-run-"))
    planned = plan_limits(policy, "pending")
    memory, tasks = planned.memory_bytes or 0, planned.max_processes or 0
    cgroup = create_run_cgroup(
        run_dir.name, memory + RUNTIME_MEMORY_OVERHEAD, tasks + RUNTIME_TASK_OVERHEAD
    )
    limits = plan_limits(policy, "cgroup_v1" if cgroup else "rlimit")
    try:
        yield run_dir, cgroup, limits
    finally:
        if cgroup is not None:
            cgroup.remove()
        discard_tree(run_dir)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _finish(outcome: Bounded, launch: Launch, policy: Policy, scratch: Path) -> dict[str, object]:
    fields: dict[str, object] = {
        "status": outcome.status,
        "exit_code": outcome.exit_code,
        "stdout": outcome.stdout,
        "stderr": outcome.stderr,
        "stdout_sha256": _digest(outcome.stdout),
        "stderr_sha256": _digest(outcome.stderr),
        "probe_elapsed_seconds": outcome.elapsed_seconds,
    }
    if outcome.prefix != launch.nonce.encode("ascii"):
        # No start marker: srt or bwrap failed before the probe's shell ran
        # (including a timeout of the sandbox itself).
        fields.update(status="inconclusive", reason="sandbox_failed", exit_code=None)
        fields["detail"] = "the sandboxed shell never started"
    elif policy.scratch_bytes is not None and tree_usage(scratch).bytes > policy.scratch_bytes:
        fields.update(status="inconclusive", reason="scratch_limit")
        fields["detail"] = f"scratch exceeded {policy.scratch_bytes} bytes"
    return fields


def _execute(
    policy: Policy,
    runtime: SandboxRuntime,
    request: tuple[str, Sequence[str], Path, Path, str, Sequence[Path]],
    base: dict[str, object],
) -> SandboxResult:
    executable, args, snapshot_dir, scratch_dir, cwd, forbidden = request
    with _run_resources(policy) as (run_dir, cgroup, limits):
        base["limits"] = limits
        dirs = (snapshot_dir, scratch_dir, run_dir)
        prepared = _prepare(policy, executable, args, dirs, cwd, forbidden)
        base["executable"] = prepared.executable
        launch, base["settings_digest"] = _make_launch(policy, runtime, prepared, run_dir, limits)
        allowed = [prepared.paths.snapshot, prepared.paths.scratch, prepared.paths.runtime_tmp]
        verdict = run_canary(launch, allowed, cgroup)
        if not verdict.held:
            raise Refused(verdict.reason or "canary_readable", verdict.detail)
        try:
            # seed 000: recheck identity immediately before launch.
            recheck_identity(prepared.executable)
        except ExecutableChanged as exc:
            raise Refused("executable_changed", str(exc)) from exc
        outcome = run_bounded(
            launch.argv(prepared.executable.path, args),
            env=launch.runtime_env,
            cwd=launch.cwd,
            timeout_seconds=policy.timeout_seconds,
            budget=policy.max_output_bytes,
            skip_stdout_prefix=len(launch.nonce),
            cgroup=cgroup,
        )
        return SandboxResult.model_validate(
            {**base, **_finish(outcome, launch, policy, prepared.paths.scratch)}
        )


def run_sandboxed(
    *,
    policy: Policy,
    executable: str,
    args: Sequence[str],
    snapshot_dir: Path,
    scratch_dir: Path,
    cwd: str = ".",
    runtime: SandboxRuntime,
    extra_forbidden_roots: Sequence[Path] = (),
) -> SandboxResult:
    """Run ``executable args`` under ``policy`` in the sandbox; never raises for refusals.

    Every prerequisite failure returns ``status="inconclusive"`` with a reason.
    """
    started = time.monotonic()
    base: dict[str, object] = {"sandbox_digest": runtime.digest}
    try:
        if not sys.platform.startswith("linux") and sys.platform != "darwin":
            raise Refused("unsupported", f"platform {sys.platform!r} is not supported")
        verify_unchanged(runtime)
        request = (executable, args, snapshot_dir, scratch_dir, cwd, extra_forbidden_roots)
        result = _execute(policy, runtime, request, base)
    except Refused as exc:
        result = SandboxResult.model_validate(
            {**base, "status": "inconclusive", "reason": exc.reason, "detail": str(exc)}
        )
    except SandboxUnavailable as exc:
        result = SandboxResult.model_validate(
            {**base, "status": "inconclusive", "reason": exc.reason, "detail": str(exc)}
        )
    except OSError as exc:
        result = SandboxResult.model_validate(
            {**base, "status": "inconclusive", "reason": "sandbox_failed", "detail": str(exc)}
        )
    return result.model_copy(update={"elapsed_seconds": time.monotonic() - started})
