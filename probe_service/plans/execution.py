"""The real sandbox backend: a run slot, the snapshot, scratch and the pinned runtime.

docs/ARCHITECTURE.md, "Seams": the only ``SandboxBackend`` the package has. Each
execution holds one run slot from before its first mount to after its last unmount: its
snapshot overlay and scratch are mounted in the slot's private mount namespace and
reached only through it (docs/ARCHITECTURE.md, "Mount namespaces"); the probe runs
through ``run_sandboxed``, and the directories are removed whatever happens.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..errors import InfrastructureError, LinkEscapes, ProbeServiceError, SandboxUnavailable
from ..fstree import discard_tree
from ..rundirs import make_run_dir
from ..sandbox import SandboxResult, SandboxRuntime, locate_runtime, run_sandboxed
from ..sandbox.limits import scratch_limits
from ..sandbox.mounts import NAMESPACE_REASON
from ..sandbox.scratch import scratch_filesystem
from ..sandbox.slots import RunSlot, default_slots
from .backend import Execution, ExecutionRequest, launch_lane, refused_result
from .host_tables import HostTableWatch
from .overlay import apply_interventions, write_fixtures
from .warm import default_snapshot_cache

__all__ = ["RuntimeBackend", "RuntimeSandbox"]


@dataclass(frozen=True)
class RuntimeBackend:
    """The real backend: ``runtime`` when the caller verified one already (a worker does
    at its start), else the pinned runtime located for each run."""

    runtime: SandboxRuntime | None = None
    #: Where the pinned runtime is installed when none was given (the settings').
    sandbox_dir: Path | None = None

    def locate(self) -> RuntimeSandbox:
        """The verified runtime for one run; raises SandboxUnavailable (with its reason)."""
        return RuntimeSandbox(self.runtime or locate_runtime(self.sandbox_dir))


@dataclass(frozen=True)
class RuntimeSandbox:
    """The pinned Sandbox Runtime, verified for one run."""

    runtime: SandboxRuntime

    @property
    def digest(self) -> str:
        """The runtime install's digest (docs/ARCHITECTURE.md, "Trust rules")."""
        return self.runtime.digest

    @contextmanager
    def execute(self, request: ExecutionRequest) -> Iterator[Execution]:
        """Run the probe in disposable directories, removed whatever happens.

        Raises InfrastructureError for the store; every other failure is a refusal."""
        with ExitStack() as cleanup:
            try:
                slot = cleanup.enter_context(default_slots().acquire())
            except SandboxUnavailable as exc:
                yield Execution(refused_result(exc.reason, str(exc)))
                return
            workdir = make_run_dir(slot.identity.gid)
            # Last out (after the unmounts in the slot's namespace): iterative and link-safe,
            # for the probe shaped this tree (docs/ARCHITECTURE.md, "Host-side walks"); a
            # failure is logged, never raised over the run's receipt.
            cleanup.callback(discard_tree, workdir)
            with request.clock.timing("materialize"):
                refused = _materialize(request, workdir, cleanup, slot)
            if refused is not None:
                yield Execution(refused)
                return
            scratch = workdir / "scratch"
            # docs/ARCHITECTURE.md, "Trust rules": host-wide tables full while it ran
            # make a failure no evidence (``host_resource``).
            tables = cleanup.enter_context(HostTableWatch())
            result = self._launch(request, workdir, slot)
            full_tables = tuple(tables.stop())
            # The oracle reads scratch as the run's namespace shows it.
            yield Execution(result, workdir, slot.view(scratch), full_tables)

    def _launch(self, request: ExecutionRequest, workdir: Path, slot: RunSlot) -> SandboxResult:
        """Launch the plan's probe in the slot, over the materialized ``workdir``."""
        plan = request.plan
        return run_sandboxed(
            policy=request.policy,
            executable=plan.executable,
            args=plan.args,
            snapshot_dir=workdir / "snapshot",
            scratch_dir=workdir / "scratch",
            cwd=plan.cwd,
            runtime=self.runtime,
            extra_forbidden_roots=(request.store.root,),
            toolchains=request.toolchains,
            preflight=plan.preflight,
            slot=slot,
            environment=request.environ,
            plan_environment=plan.environment,
            # docs/ARCHITECTURE.md, "Pipelined worker": only each spawn holds a lane; the
            # materializing before, the run's set-up and wraps, and the judging after it
            # overlap other runs' launches.
            lane=lambda: launch_lane(request),
        )


def _materialize(
    request: ExecutionRequest, workdir: Path, cleanup: ExitStack, slot: RunSlot
) -> SandboxResult | None:
    """Materialize the snapshot, mount scratch, write fixtures and interventions, all in
    ``slot``'s mount namespace.

    Returns the refusal when one of them fails; raises InfrastructureError for the store.
    """
    plan, policy = request.plan, request.policy
    snapshot_dir, scratch = workdir / "snapshot", workdir / "scratch"
    try:
        # A warm tree when this worker holds one (docs/ARCHITECTURE.md, "Warm snapshots").
        cache = default_snapshot_cache()
        cache.materialize(request.store, plan.snapshot_id, snapshot_dir, slot.namespace)
        cleanup.callback(cache.release, snapshot_dir)
    except InfrastructureError:
        raise  # the store may answer on a retry; that is not the probe's outcome
    except LinkEscapes as exc:
        return refused_result("snapshot_link_escapes", str(exc))
    except SandboxUnavailable as exc:
        return refused_result(exc.reason, str(exc))
    except ProbeServiceError as exc:
        return refused_result("snapshot_unavailable", str(exc))
    try:
        scratch.mkdir()
        # Scratch is a size- and inode-limited filesystem before anything is written
        # to it, so fixtures count against the same limit (docs/ARCHITECTURE.md, Limits).
        cleanup.enter_context(scratch_filesystem(scratch, scratch_limits(policy), slot.namespace))
    except SandboxUnavailable as exc:
        lost = exc.reason == NAMESPACE_REASON
        return refused_result(exc.reason if lost else "limits_unenforceable", str(exc))
    try:
        write_fixtures(slot.view(scratch), plan.fixtures)
        apply_interventions(slot.view(snapshot_dir), plan.interventions)
    except (ProbeServiceError, OSError) as exc:
        return refused_result("overlay_failed", str(exc))
    return None
