"""The sandbox seam: what ``probe_run`` asks of the sandbox, and what it gets back.

docs/ARCHITECTURE.md, "Seams": a run reaches the sandbox only through a
``SandboxBackend``. The backend owns everything that needs root and the pinned runtime
(the run slot, the materialized snapshot, scratch, fixtures and interventions, the
sandboxed launch, the host-table watch); the run keeps everything that decides what the
execution means (the oracle, the decision rules, reuse, confirmation, the receipt). The
one real backend is ``execution.RuntimeBackend``; a stub that returns canned results lives
only in the test suite and is passed in by tests.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..policies import Policy
from ..sandbox import SandboxResult
from ..store import Store
from ..toolchains import ResolvedToolchain
from .host_tables import TableReading
from .lanes import LaunchLanes
from .models import Plan
from .phases import PhaseClock

__all__ = [
    "Execution",
    "ExecutionRequest",
    "Sandbox",
    "SandboxBackend",
    "launch_lane",
    "refused_result",
]


@dataclass(frozen=True)
class ExecutionRequest:
    """One execution of a stored plan's probe under a policy, with the run's toolchains."""

    store: Store
    plan: Plan
    policy: Policy
    toolchains: Sequence[ResolvedToolchain]
    #: The run's phase clock: the backend times ``materialize`` on it.
    clock: PhaseClock
    #: Where the policy's environment names take their values: the settings' frozen copy
    #: of the environment (docs/ARCHITECTURE.md, "Settings").
    environ: Mapping[str, str]
    #: The process's launch lanes (docs/ARCHITECTURE.md, "Pipelined worker"): the backend
    #: holds one around the sandboxed launch only. None: no limit (one run at a time, or
    #: a caller that bounds its threads itself).
    lanes: LaunchLanes | None = None


@contextmanager
def launch_lane(request: ExecutionRequest) -> Iterator[None]:
    """Hold one of the request's launch lanes for the block (none to hold without lanes);
    the time spent waiting for it is the run's ``lane`` phase."""
    if request.lanes is None:
        yield
        return
    with ExitStack() as held:
        with request.clock.timing("lane"):
            held.enter_context(request.lanes.hold())
        yield


@dataclass(frozen=True)
class Execution:
    """What one execution left, readable until its directories are removed."""

    result: SandboxResult
    #: The run's directory (its ``snapshot`` and ``scratch``), to say what the probe was
    #: allowed. None, like ``scratch``, when the execution was refused before the probe
    #: could start: such a result is not judged.
    workdir: Path | None = None
    #: Scratch as the host may read it for the oracle (the run slot's view of it).
    scratch: Path | None = None
    #: Host-wide tables found full while the probe ran (docs/ARCHITECTURE.md, "Trust rules").
    full_tables: tuple[TableReading, ...] = ()


class Sandbox(Protocol):
    """A sandbox verified for one run: its digest keys the action."""

    @property
    def digest(self) -> str:
        """The digest of what runs probes; part of every action key and receipt."""
        ...

    def execute(self, request: ExecutionRequest) -> AbstractContextManager[Execution]:
        """Execute the request's probe once; the execution's directories live until the
        context exits. The sandboxed launch, and only it, runs inside ``launch_lane``
        (materializing before it and judging after it stay outside). Refusals end in an
        ``inconclusive`` result, never an exception; raises InfrastructureError when the
        store does not answer."""
        ...


class SandboxBackend(Protocol):
    """Where runs execute: verified once per run, before its action key is taken."""

    def locate(self) -> Sandbox:
        """The sandbox this run uses; raises SandboxUnavailable (with its reason)."""
        ...


def refused_result(reason: str, detail: str) -> SandboxResult:
    """The result of a run refused before (or instead of) launching its probe."""
    return SandboxResult.model_validate(
        {"status": "inconclusive", "reason": reason, "detail": detail}
    )
