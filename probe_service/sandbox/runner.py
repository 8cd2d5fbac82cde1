"""``run_sandboxed``: one probe, under one policy, through the verified runtime.

docs/ARCHITECTURE.md, "Trust rules": "Nothing runs unsandboxed, ever. Every failure of a
prerequisite ends in ``inconclusive`` with a machine-readable reason, never in a fallback."
So this module converts every refusal into a result and never raises for them.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import signal
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from probe_service.envnames import PLAN_MODULE_PATHS
from probe_service.errors import SandboxUnavailable
from probe_service.policies.executables import (
    ExecutableChanged,
    recheck_identity,
)
from probe_service.policies.model import (
    Policy,
    plan_environment_refusal,
    probe_environment,
)
from probe_service.sandbox.canary import Canaried, launch_canaried, run_canary
from probe_service.sandbox.gate import StartGate, create_gate
from probe_service.sandbox.helper import (
    LauncherPool,
    LauncherUnavailable,
    default_launchers,
    helper_launch,
)
from probe_service.sandbox.host_tables import host_table_problem
from probe_service.sandbox.identity import ProbeIdentity, check_reachable, launcher_prefix
from probe_service.sandbox.launch import NET_GUARD_PORTS_ENV, Launch, build_launch
from probe_service.sandbox.limits import (
    LAUNCHER_TASKS,
    RELAY_TASKS,
    RunCgroup,
    plan_limits,
    prlimit_argv,
    scratch_limits,
)
from probe_service.sandbox.preflight import describe_failure, preflight_result
from probe_service.sandbox.prepare import (
    Command,
    Prepared,
    Refused,
    RunRequest,
    canonical_dir,
    prepare_run,
)
from probe_service.sandbox.process import Bounded
from probe_service.sandbox.results import LimitsApplied, SandboxResult
from probe_service.sandbox.runtime import SandboxRuntime, find_system_tool, verify_unchanged
from probe_service.sandbox.scratch import run_scratch, scratch_exhausted
from probe_service.sandbox.seccomp import expected_seccomp_filters, write_filter
from probe_service.sandbox.selfcheck import verify_limits
from probe_service.sandbox.settings import build_settings, write_settings
from probe_service.sandbox.slots import RunSlot, default_slots
from probe_service.search_paths import unsafe_search_path
from probe_service.toolchains.resolve import (
    ResolvedToolchain,
    ToolchainChanged,
    recheck_toolchains,
)

__all__ = ["Refused", "run_canary", "run_sandboxed"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProbeValues:
    """The environment a run passes before the runner's own names: the policy's values
    and the plan's (``policies.model.probe_environment``), and which names the plan set."""

    values: Mapping[str, str]
    plan_set: frozenset[str] = frozenset()

    @classmethod
    def of(
        cls, policy: Policy, environ: Mapping[str, str], plan_values: Mapping[str, str]
    ) -> ProbeValues:
        """The values of a run under ``policy``; raises Refused (``environment_not_allowed``)
        when the plan sets a name the policy does not let it set."""
        refusal = plan_environment_refusal(policy, plan_values)
        if refusal is not None:
            raise Refused("environment_not_allowed", refusal)
        return cls(probe_environment(policy, environ, plan_values), frozenset(plan_values))


def _probe_env(values: ProbeValues, scratch: Path, slot: RunSlot) -> dict[str, str]:
    # docs/ARCHITECTURE.md, "Probe environment": exactly the names the policy lists, with
    # its fixed values or the worker's (the settings' frozen copy, never the live
    # environment), the values the plan sets for names the policy lets it, plus our
    # scratch-pointing names. The source is read-only, so home, temporary files and the
    # caches tools keep by default in the home, the XDG directories or the project itself
    # all go to scratch; these names win over every other layer (the plan runner's
    # RUNNER_GENERATED lists them).
    env = dict(values.values)
    for sub in ("home", "tmp"):
        (slot.view(scratch) / sub).mkdir(exist_ok=True)
    home = scratch / "home"
    env.update(BYTE_PROBE_SCRATCH=str(scratch), HOME=str(home), TMPDIR=str(scratch / "tmp"))
    env.update(
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        XDG_STATE_HOME=str(home / ".local" / "state"),
        PIP_CACHE_DIR=str(home / ".cache" / "pip"),
        npm_config_cache=str(home / ".npm"),
        MYPY_CACHE_DIR=str(home / ".cache" / "mypy"),
        RUFF_CACHE_DIR=str(home / ".cache" / "ruff"),
        # Not PYTHONPYCACHEPREFIX: it makes Python ignore the compiled caches of the
        # standard library and toolchains and compile every import again, every run.
        PYTHONDONTWRITEBYTECODE="1",
    )
    return env


def _system_tool(name: str) -> Path:
    found = find_system_tool(name)
    if found is None:
        raise Refused("sandbox_prerequisite_missing", f"{name} not in fixed system directories")
    return found


@dataclass(frozen=True)
class _Resources:
    run_dir: Path
    slot: RunSlot
    cgroup: RunCgroup
    limits: LimitsApplied
    scratch: Path

    @property
    def identity(self) -> ProbeIdentity:
        return self.slot.identity


def _make_launch(
    policy: Policy,
    runtime: SandboxRuntime,
    prepared: Prepared,
    res: _Resources,
    values: ProbeValues,
) -> tuple[Launch, str, dict[str, Any]]:
    settings = build_settings(
        policy,
        runtime,
        prepared.paths,
        Path(prepared.executable.path),
        toolchains=[Path(t) for t in sorted(policy.toolchains.values())],
        extra_executables=[Path(c.identity.path) for c in prepared.preflight],
        extra_read_paths=prepared.extra_reads,
    )
    settings_path = res.run_dir / "settings.json"
    digest = write_settings(settings, settings_path)
    os.chown(settings_path, res.identity.uid, res.identity.gid)
    probe_env = _probe_env(values, prepared.paths.scratch, res.slot)
    # A module path the plan set is its stated intent (``envnames.PLAN_MODULE_PATHS``); a
    # PATH it set is judged like any other.
    unsafe = unsafe_search_path(probe_env, values.plan_set & PLAN_MODULE_PATHS)
    if unsafe is not None:
        raise Refused("unsafe_search_path", unsafe)
    host_prefix = launcher_prefix(res.identity, _system_tool("unshare"), _system_tool("setpriv"))
    gate = res.run_dir / "tmp" / "start-gate"
    # docs/ARCHITECTURE.md, "Limits": root-owned and read-only to the probe uid, which hands
    # it to bubblewrap through sandbox/bwrap-guard.sh.
    seccomp_filter = res.run_dir / "seccomp.bpf"
    write_filter(seccomp_filter)
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
        # The slot's run directory serves many runs: the marker names this one.
        marker=f"{res.run_dir.name}-{secrets.token_hex(4)}",
        host_prefix=host_prefix,
        gate_path=gate,
        seccomp_filter=seccomp_filter,
        shm_dir=prepared.paths.scratch,
        seccomp_filters=expected_seccomp_filters(runtime.apply_seccomp_path is not None),
        # docs/ARCHITECTURE.md, "Mount namespaces": every launch enters the slot's namespace.
        enter_namespace=res.slot.namespace.enter_argv,
    )
    return launch, digest, settings


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    """Give the probe uid the scratch tree (fixtures included); never follows links."""
    pending = [root]
    while pending:
        current = pending.pop()
        os.lchown(current, uid, gid)
        if current.is_dir() and not current.is_symlink():
            with os.scandir(current) as entries:
                pending.extend(Path(entry.path) for entry in entries)


@contextmanager
def _run_resources(
    policy: Policy, scratch_dir: Path, runtime: SandboxRuntime, slot: RunSlot | None
) -> Iterator[_Resources]:
    limits = plan_limits(policy)
    crowded = host_table_problem(policy, extra_tasks=LAUNCHER_TASKS + RELAY_TASKS)
    if crowded is not None:
        raise Refused("limits_unenforceable", crowded)
    with ExitStack() as stack:
        try:
            if slot is None:  # a caller that prepared its directories without a slot
                slot = stack.enter_context(default_slots().acquire())
            verify_limits(runtime)
        except SandboxUnavailable as exc:
            raise Refused(exc.reason, str(exc)) from exc
        # docs/ARCHITECTURE.md, "Limits": the slot's kept cgroups and run directory, reset
        # and proven clean for this run (or made again), with this run's limits.
        try:
            run_dir, cgroup = slot.resources.ready(limits)
        except SandboxUnavailable as exc:
            raise Refused(exc.reason, str(exc)) from exc
        stack.callback(slot.resources.release)
        scratch = canonical_dir(scratch_dir, "scratch")
        try:
            stack.enter_context(run_scratch(scratch, scratch_limits(policy), slot.namespace))
        except SandboxUnavailable as exc:
            raise Refused(exc.reason, str(exc)) from exc
        yield _Resources(run_dir, slot, cgroup, limits, scratch)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _limit_reason(outcome: Bounded, res: _Resources) -> tuple[str, str] | None:
    """Return (reason, detail) when the probe ran into a limit the kernel enforced."""
    hit = res.cgroup.limit_hit()
    if hit == "memory":
        limit = res.limits.memory_bytes
        return "memory_limit", f"the probe was killed at its {limit}-byte memory limit"
    if hit == "tcp":
        limit = res.limits.tcp_buffer_bytes
        return "memory_limit", f"the probe's kernel TCP buffers reached their {limit}-byte limit"
    if hit == "processes":
        return "process_limit", f"the probe reached its limit of {res.limits.max_processes} tasks"
    if hit == "relays":
        relays = res.limits.relay_tasks
        return "process_limit", f"the runtime's network relays reached their {relays} tasks"
    full = scratch_exhausted(res.slot.view(res.scratch))
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
    if (guard := launch.guard_failure(outcome.prefix)) is not None:
        fields.update(status="inconclusive", reason=guard[0], detail=guard[1], exit_code=None)
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


def _probe_phases(outcome: Bounded) -> dict[str, float]:
    """Start-up (spawn to marker) and the probe's own time, when the marker arrived."""
    if outcome.launch_seconds is None:
        return {}
    return {"launch": outcome.launch_seconds, "execute": outcome.elapsed_seconds}


def _check_reachable(prepared: Prepared, res: _Resources, toolchains: Sequence[Path]) -> None:
    # As the run's own namespace shows each path: its snapshot and scratch are mounts there.
    uid, gid, seen = res.identity.uid, res.identity.gid, res.slot.namespace
    try:
        check_reachable(prepared.paths.snapshot, "snapshot", uid=uid, gid=gid, mounts=seen)
        check_reachable(res.scratch, "scratch", uid=uid, gid=gid, write=True, mounts=seen)
        for command in (prepared.command, *prepared.preflight):
            path = Path(command.identity.path)
            check_reachable(path, "executable", uid=uid, gid=gid, mounts=seen)
        for root in toolchains:
            check_reachable(root, "toolchain", uid=uid, gid=gid, mounts=seen)
    except SandboxUnavailable as exc:
        raise Refused(exc.reason, str(exc)) from exc


def _recheck_before_launch(prepared: Prepared, request: RunRequest) -> None:
    """docs/ARCHITECTURE.md, "Executables" and "Toolchains": recheck every identity and
    toolchain digest immediately before the first launch of repository-chosen commands."""
    try:
        for command in (*prepared.preflight, prepared.command):
            recheck_identity(command.identity)
    except ExecutableChanged as exc:
        raise Refused("executable_changed", str(exc)) from exc
    roots = [prepared.paths.snapshot, prepared.paths.scratch, *request.forbidden]
    try:
        recheck_toolchains(request.toolchains, roots)
    except ToolchainChanged as exc:
        raise Refused("toolchain_changed", str(exc)) from exc


def _execute(
    policy: Policy,
    runtime: SandboxRuntime,
    request: RunRequest,
    base: dict[str, object],
    phases: dict[str, float],
    launchers: LauncherPool,
    slot: RunSlot | None,
    values: ProbeValues,
) -> SandboxResult:
    with _run_resources(policy, request.scratch_dir, runtime, slot) as res:
        base["limits"] = res.limits
        dirs = (request.snapshot_dir, res.scratch, res.run_dir)
        prepared = prepare_run(policy, request, dirs, res.slot.namespace)
        base["executable"] = prepared.executable
        launch, base["settings_digest"], settings = _make_launch(
            policy, runtime, prepared, res, values
        )
        _chown_tree(res.slot.view(res.scratch), res.identity.uid, res.identity.gid)
        _check_reachable(prepared, res, [Path(t.path) for t in request.toolchains])
        gate = create_gate(res.run_dir / "tmp", res.cgroup, res.identity.uid, res.identity.gid)
        ports = launch.runtime_env[NET_GUARD_PORTS_ENV]
        run = (prepared, res, gate)
        helper = launchers.helper_for(runtime, settings, ports, res.slot.namespace)
        if helper is not None:
            helped, wraps = helper_launch(launch, settings, prepared.paths, helper)
            try:
                return _run_commands(policy, helped, run, request, base, phases)
            except LauncherUnavailable as exc:
                # Fall back to the CLI path, canaried again from the start; never unsandboxed.
                log.warning("%s; this run falls back to the CLI path", exc)
                launchers.discard(helper)
            finally:
                for _ in range(wraps[0]):
                    helper.command_done()
        return _run_commands(policy, launch, run, request, base, phases)


def _run_commands(
    policy: Policy,
    launch: Launch,
    run: tuple[Prepared, _Resources, StartGate],
    request: RunRequest,
    base: dict[str, object],
    phases: dict[str, float],
) -> SandboxResult:
    """The preflight commands, then the probe, each one launch through ``launch`` whose own
    instance runs the canary first (docs/ARCHITECTURE.md, "Canary"); raises ``Refused``
    and ``LauncherUnavailable`` (the caller falls back to the CLI path)."""
    prepared, res, gate = run
    allowed = [prepared.paths.snapshot, prepared.paths.scratch, prepared.paths.runtime_tmp]
    phases["canary"] = 0.0
    rechecked = False

    @contextmanager
    def hold() -> Iterator[None]:
        # Each launch is wrapped first, then waits for the caller's lane: only the spawn
        # holds one (docs/ARCHITECTURE.md, "Pipelined worker").
        nonlocal rechecked
        with (request.lane or nullcontext)():
            if not rechecked:
                # Immediately before the first launch that may run a repository-chosen
                # command: after the wait for a lane, never before it.
                _recheck_before_launch(prepared, request)
                rechecked = True
            yield

    def launch_one(command: Command) -> Bounded:
        canaried = launch_once(command)
        if canaried.verdict.may_retry:
            # Nothing of the command ran (no start marker): one more launch is safe.
            log.warning(
                "the sandbox failed before the command started; once more: %s",
                canaried.verdict.detail,
            )
            canaried = launch_once(command)
        if not canaried.verdict.held:
            raise Refused(canaried.verdict.reason or "canary_readable", canaried.verdict.detail)
        return canaried.outcome

    def launch_once(command: Command) -> Canaried:
        canaried = launch_canaried(
            launch,
            command.launch_path,
            command.args,
            gate=gate,
            allowed_roots=allowed,
            cgroup=res.cgroup,
            expected_uid=res.identity.uid,
            timeout_seconds=policy.timeout_seconds,
            budget=policy.max_output_bytes,
            hold=hold,
        )
        phases["canary"] += canaried.canary_seconds
        return canaried

    ran = []
    for command in prepared.preflight:
        outcome = launch_one(command)
        finished = _finish(outcome, launch, res)
        ran.append(preflight_result(command.declared, command.identity, finished))
        if not ran[-1].passed:
            base["preflight"] = tuple(ran)
            raise Refused("preflight_failed", describe_failure(ran[-1]))
    base["preflight"] = tuple(ran)
    res.cgroup.reset_memory_peak()
    outcome = launch_one(prepared.command)
    # Phases time the probe's own command; preflight commands run before it, untimed.
    phases.update(_probe_phases(outcome))
    base["memory_peak_bytes"] = res.cgroup.memory_peak_bytes()
    base["launcher"] = launch.mode
    return SandboxResult.model_validate({**base, **_finish(outcome, launch, res)})


def run_sandboxed(
    *,
    policy: Policy,
    executable: str,
    args: Sequence[str],
    snapshot_dir: Path,
    scratch_dir: Path,
    environment: Mapping[str, str],
    plan_environment: Mapping[str, str] | None = None,
    cwd: str = ".",
    runtime: SandboxRuntime,
    extra_forbidden_roots: Sequence[Path] = (),
    toolchains: Sequence[ResolvedToolchain] = (),
    preflight: Sequence[Sequence[str]] = (),
    extra_read_paths: Sequence[Path] = (),
    launchers: LauncherPool | None = None,
    slot: RunSlot | None = None,
    lane: Callable[[], AbstractContextManager[object]] | None = None,
) -> SandboxResult:
    """Run ``executable args`` under ``policy`` in the sandbox; never raises for refusals.

    The policy's environment names take their values from ``environment`` (the settings'
    frozen copy: docs/ARCHITECTURE.md, "Probe environment"); nothing else of it reaches
    the probe. ``plan_environment`` holds the values the plan sets: each name must be one
    the policy lists under ``plan_environment``, else the run ends
    ``environment_not_allowed`` before anything launches.

    ``toolchains`` are the policy's toolchains as resolved (with digests) by the caller;
    each is rechecked before launch. ``preflight`` commands (argument arrays) run first,
    in the same sandbox (one launch each, its canary inside), and the first that fails
    ends the run ``preflight_failed``.
    ``extra_read_paths`` (read-only allow-backs) is for the service's built-in profiles
    only; plans and policy files cannot name it. Every prerequisite failure returns
    ``status="inconclusive"`` with a reason. Commands are wrapped by a persistent launcher
    from ``launchers`` (the process's pool unless given) when one serves the run, else by
    the srt CLI. Everything runs in the run slot's private mount namespace: ``slot`` when
    the caller holds one (its snapshot and scratch mounts are in it), else one taken here
    (docs/ARCHITECTURE.md, "Mount namespaces"). ``lane`` is entered around each spawn
    alone, once its command is wrapped (the caller's launch lane: "Pipelined worker").
    """
    started = time.monotonic()
    phases: dict[str, float] = {}
    base: dict[str, object] = {"sandbox_digest": runtime.digest, "phases": phases}
    try:
        if not sys.platform.startswith("linux") and sys.platform != "darwin":
            raise Refused("unsupported", f"platform {sys.platform!r} is not supported")
        verify_unchanged(runtime)
        request = RunRequest(
            executable,
            args,
            snapshot_dir,
            scratch_dir,
            cwd,
            extra_forbidden_roots,
            toolchains,
            preflight,
            tuple(extra_read_paths),
            lane,
        )
        # Exactly the policy's toolchains, each resolved at its own root: a caller cannot
        # grant a tree the policy does not name (docs/ARCHITECTURE.md, "Toolchains").
        if sorted(policy.toolchains.items()) != sorted((t.name, t.path) for t in toolchains):
            raise Refused("toolchain_unavailable", "the policy's toolchains were not resolved")
        values = ProbeValues.of(policy, environment, plan_environment or {})
        pool = launchers if launchers is not None else default_launchers()
        result = _execute(policy, runtime, request, base, phases, pool, slot, values)
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
