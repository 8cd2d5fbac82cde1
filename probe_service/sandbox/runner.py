"""``run_sandboxed``: one probe, under one policy, through the verified runtime.

docs/ARCHITECTURE.md, "Trust rules": "Nothing runs unsandboxed, ever. Every failure of a
prerequisite ends in ``inconclusive`` with a machine-readable reason, never in a fallback."
So this module converts every refusal into a result and never raises for them.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from probe_service.errors import ProbeServiceError, SandboxUnavailable
from probe_service.fstree import remove_tree
from probe_service.policies.executables import (
    ExecutableChanged,
    ExecutableIdentity,
    ExecutableNotAllowed,
    capture_identity,
    recheck_identity,
    resolve_executable,
)
from probe_service.policies.model import Policy, passed_environment
from probe_service.rundirs import make_run_dir
from probe_service.sandbox.argsize import MAX_LAUNCH_ARG_BYTES, launch_arg_bytes
from probe_service.sandbox.canary import run_canary
from probe_service.sandbox.gate import create_gate
from probe_service.sandbox.identity import (
    ProbeIdentity,
    acquire_identity,
    check_reachable,
    launcher_prefix,
)
from probe_service.sandbox.launch import Launch, build_launch
from probe_service.sandbox.limits import (
    RunCgroup,
    create_run_cgroup,
    plan_limits,
    prlimit_argv,
    scratch_limits,
)
from probe_service.sandbox.process import Bounded, run_bounded
from probe_service.sandbox.results import LimitsApplied, SandboxResult
from probe_service.sandbox.runtime import SandboxRuntime, find_system_tool, verify_unchanged
from probe_service.sandbox.scratch import (
    ScratchLimits,
    is_scratch_mount,
    mount_scratch,
    scratch_exhausted,
    unmount_scratch,
)
from probe_service.sandbox.selfcheck import verify_limits
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
    extra_reads: tuple[Path, ...] = ()


def _canonical_dir(path: Path, what: str) -> Path:
    real = Path(os.path.realpath(path))
    if not real.is_dir():
        raise Refused("sandbox_failed", f"{what} {path} is not a directory")
    return real


def _resolve_cwd(snapshot: Path, cwd: str) -> Path:
    # docs/ARCHITECTURE.md, "Runner": an invalid working directory returns inconclusive.
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
    snapshot_dir, scratch, run_dir = dirs
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
    paths = RunPaths(snapshot, scratch, run_dir / "home", run_dir / "tmp")
    return _Prepared(identity, paths, work_dir)


def _probe_env(policy: Policy, scratch: Path) -> dict[str, str]:
    # docs/ARCHITECTURE.md, "Probe environment": exactly the names the policy
    # lists, with the worker's values, plus our scratch-pointing names.
    env = passed_environment(policy, os.environ)
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


@dataclass(frozen=True)
class _Resources:
    run_dir: Path
    identity: ProbeIdentity
    cgroup: RunCgroup
    limits: LimitsApplied
    scratch: Path


def _make_launch(
    policy: Policy, runtime: SandboxRuntime, prepared: _Prepared, res: _Resources
) -> tuple[Launch, str]:
    settings = build_settings(
        policy, runtime, prepared.paths, Path(prepared.executable.path), prepared.extra_reads
    )
    settings_path = res.run_dir / "settings.json"
    digest = write_settings(settings, settings_path)
    os.chown(settings_path, res.identity.uid, res.identity.gid)
    probe_env = _probe_env(policy, prepared.paths.scratch)
    host_prefix = launcher_prefix(res.identity, _system_tool("unshare"), _system_tool("setpriv"))
    gate = res.run_dir / "tmp" / "start-gate"
    launch = build_launch(
        settings_path=settings_path,
        node_path=runtime.node_path,
        net_guard_path=runtime.net_guard_path,
        cli_path=runtime.cli_path,
        cwd=prepared.cwd,
        runtime_home=prepared.paths.runtime_home,
        runtime_tmp=prepared.paths.runtime_tmp,
        prefix_argv=prlimit_argv(_system_tool("prlimit"), res.limits),
        probe_env=probe_env,
        pass_proxy_env=bool(policy.allowed_domains),
        allowed_ports=policy.allowed_ports,
        nonce=secrets.token_hex(16),
        marker=res.run_dir.name,
        host_prefix=host_prefix,
        gate_path=gate,
    )
    return launch, digest


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    """Give the probe uid the scratch tree (fixtures included); never follows links."""
    pending = [root]
    while pending:
        current = pending.pop()
        os.lchown(current, uid, gid)
        if current.is_dir() and not current.is_symlink():
            with os.scandir(current) as entries:
                pending.extend(Path(entry.path) for entry in entries)


def _checked_scratch_mount(scratch: Path, wanted: ScratchLimits) -> None:
    """Refuse a caller-mounted scratch filesystem larger than the policy allows."""
    info = os.statvfs(scratch)
    page = os.sysconf("SC_PAGE_SIZE")
    allowed_bytes = -(-max(wanted.size_bytes, page) // page) * page
    if info.f_blocks * info.f_frsize > allowed_bytes or info.f_files > wanted.inodes:
        raise Refused(
            "limits_unenforceable",
            f"scratch {scratch}: mounted with {info.f_blocks * info.f_frsize} bytes and "
            f"{info.f_files} inodes, more than the policy's {wanted.size_bytes} and "
            f"{wanted.inodes}",
        )


@contextmanager
def _scratch_for_run(scratch: Path, wanted: ScratchLimits) -> Iterator[None]:
    if is_scratch_mount(scratch):
        _checked_scratch_mount(scratch, wanted)
        yield
        return
    try:
        mount_scratch(scratch, wanted)
    except SandboxUnavailable as exc:
        raise Refused("limits_unenforceable", str(exc)) from exc
    try:
        yield
    finally:
        unmount_scratch(scratch)


@contextmanager
def _run_resources(policy: Policy, scratch_dir: Path) -> Iterator[_Resources]:
    limits = plan_limits(policy)
    with ExitStack() as stack:
        try:
            identity = stack.enter_context(acquire_identity())
            verify_limits()
        except SandboxUnavailable as exc:
            raise Refused(exc.reason, str(exc)) from exc
        run_dir = make_run_dir()
        stack.callback(remove_tree, run_dir)
        try:
            cgroup = create_run_cgroup(run_dir.name, limits)
        except SandboxUnavailable as exc:
            raise Refused(exc.reason, str(exc)) from exc
        stack.callback(cgroup.remove)
        scratch = _canonical_dir(scratch_dir, "scratch")
        stack.enter_context(_scratch_for_run(scratch, scratch_limits(policy)))
        for sub in ("home", "tmp"):
            (run_dir / sub).mkdir(mode=0o700)
            os.chown(run_dir / sub, identity.uid, identity.gid)
        yield _Resources(run_dir, identity, cgroup, limits, scratch)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _limit_reason(outcome: Bounded, res: _Resources) -> tuple[str, str] | None:
    """Return (reason, detail) when the probe ran into a limit the kernel enforced."""
    hit = res.cgroup.limit_hit()
    if hit == "memory":
        limit = res.limits.memory_bytes
        return "memory_limit", f"the probe was killed at its {limit}-byte memory limit"
    if hit == "processes":
        return "process_limit", f"the probe reached its limit of {res.limits.max_processes} tasks"
    full = scratch_exhausted(res.scratch)
    if full is not None:
        limit = res.limits.scratch_bytes if full == "bytes" else res.limits.scratch_inodes
        return "scratch_limit", f"scratch reached its {full} limit ({limit})"
    if outcome.exit_code == 128 + signal.SIGXCPU:
        return "cpu_limit", f"the probe used its {res.limits.cpu_seconds} CPU seconds"
    return None


def _finish(outcome: Bounded, launch: Launch, res: _Resources) -> dict[str, object]:
    fields: dict[str, object] = {
        "status": outcome.status,
        "exit_code": outcome.exit_code,
        "stdout": outcome.stdout,
        "stderr": outcome.stderr,
        "stdout_sha256": _digest(outcome.stdout),
        "stderr_sha256": _digest(outcome.stderr),
        "probe_elapsed_seconds": outcome.elapsed_seconds,
    }
    if outcome.prefix == launch.unguarded_marker.encode("ascii"):
        fields.update(status="inconclusive", reason="network_filter_failed", exit_code=None)
        fields["detail"] = "the network guard was not active in the runtime"
    elif outcome.prefix != launch.nonce.encode("ascii") or outcome.status.startswith("start_"):
        # No start marker or a shut gate: srt or bwrap failed before the probe's
        # shell ran (including a timeout of the sandbox itself).
        fields.update(status="inconclusive", reason="sandbox_failed", exit_code=None)
        fields["detail"] = outcome.start_detail or "the sandboxed shell never started"
    elif (hit := _limit_reason(outcome, res)) is not None:
        # docs/ARCHITECTURE.md, "Limits": a run cut short by a limit says nothing
        # about the hypothesis, so it is never a refutation.
        fields.update(status="inconclusive", reason=hit[0], detail=hit[1])
    return fields


def _check_reachable(prepared: _Prepared, res: _Resources) -> None:
    uid, gid = res.identity.uid, res.identity.gid
    try:
        check_reachable(prepared.paths.snapshot, "snapshot", uid=uid, gid=gid)
        check_reachable(res.scratch, "scratch", uid=uid, gid=gid, write=True)
        check_reachable(Path(prepared.executable.path), "executable", uid=uid, gid=gid)
    except SandboxUnavailable as exc:
        raise Refused(exc.reason, str(exc)) from exc


def _execute(
    policy: Policy,
    runtime: SandboxRuntime,
    request: tuple[str, Sequence[str], Path, Path, str, Sequence[Path]],
    base: dict[str, object],
    extra_reads: tuple[Path, ...] = (),
) -> SandboxResult:
    executable, args, snapshot_dir, scratch_dir, cwd, forbidden = request
    with _run_resources(policy, scratch_dir) as res:
        base["limits"] = res.limits
        dirs = (snapshot_dir, res.scratch, res.run_dir)
        prepared = _prepare(policy, executable, args, dirs, cwd, forbidden)
        prepared = _Prepared(prepared.executable, prepared.paths, prepared.cwd, extra_reads)
        base["executable"] = prepared.executable
        launch, base["settings_digest"] = _make_launch(policy, runtime, prepared, res)
        _chown_tree(res.scratch, res.identity.uid, res.identity.gid)
        _check_reachable(prepared, res)
        gate = create_gate(res.run_dir / "tmp", res.cgroup, res.identity.uid, res.identity.gid)
        allowed = [prepared.paths.snapshot, prepared.paths.scratch, prepared.paths.runtime_tmp]
        verdict = run_canary(
            launch, allowed, res.cgroup, expected_uid=res.identity.uid, on_start=gate.release
        )
        if not verdict.held:
            raise Refused(verdict.reason or "canary_readable", verdict.detail)
        try:
            # docs/ARCHITECTURE.md, "Executables": recheck identity immediately before launch.
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
            cgroup=res.cgroup,
            start_marker=launch.nonce.encode("ascii"),
            on_start=gate.release,
        )
        return SandboxResult.model_validate({**base, **_finish(outcome, launch, res)})


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
    extra_read_paths: Sequence[Path] = (),
) -> SandboxResult:
    """Run ``executable args`` under ``policy`` in the sandbox; never raises for refusals.

    ``extra_read_paths`` (read-only allow-backs) is for the service's built-in profiles
    only; plans and policy files cannot name it. Every prerequisite failure returns
    ``status="inconclusive"`` with a reason.
    """
    started = time.monotonic()
    base: dict[str, object] = {"sandbox_digest": runtime.digest}
    try:
        if not sys.platform.startswith("linux") and sys.platform != "darwin":
            raise Refused("unsupported", f"platform {sys.platform!r} is not supported")
        verify_unchanged(runtime)
        request = (executable, args, snapshot_dir, scratch_dir, cwd, extra_forbidden_roots)
        result = _execute(policy, runtime, request, base, tuple(extra_read_paths))
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
