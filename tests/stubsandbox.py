"""A stub sandbox backend, for tests that are not about running a probe.

docs/ARCHITECTURE.md, "Seams": ``probe_run`` reaches the sandbox only through a
``SandboxBackend``. ``StubSandbox`` stands in for the real one without root: each
execution returns the answer the test canned for the plan (exit code, output, status
and reason, files left in scratch) and never executes anything of the plan. Everything
after the execution is the real code: the oracle reads the canned output and scratch,
the decision rules, reuse, confirmation and the receipt run as for a real run.

Its receipts can never be taken for evidence: its digest says it is a stub, so its
action keys never equal a real run's (a real run never reuses a stub's receipt), and its
receipts name ``launcher: stub``. It lives only here, under ``tests/``: the package never
imports it and no setting, variable, policy or flag selects it (``tests/test_seams.py``).
"""

from __future__ import annotations

import hashlib
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from probe_service.errors import ProbeServiceError
from probe_service.plans import Plan
from probe_service.plans.backend import (
    Execution,
    ExecutionRequest,
    launch_lane,
    refused_result,
)
from probe_service.policies import capture_identity, resolve_executable
from probe_service.policies.executables import ExecutableIdentity
from probe_service.sandbox import SandboxResult
from probe_service.sandbox.results import Reason, Status

__all__ = ["STUB_SANDBOX_DIGEST", "Canned", "StubSandbox", "by_last_arg"]

#: The stub's sandbox digest: not a runtime's SHA-256, and saying what it is.
STUB_SANDBOX_DIGEST = "stub-sandbox:not-evidence"


@dataclass(frozen=True)
class Canned:
    """What one stub execution answers."""

    exit_code: int | None = 0
    stdout: bytes = b""
    stderr: bytes = b""
    status: Status = "ok"
    reason: Reason | None = None
    detail: str = ""
    #: Files the execution leaves in scratch (relative path: content), for the oracles
    #: that read scratch (``junit_xml``, ``scratch_file_equals``).
    scratch_files: Mapping[str, bytes] = field(default_factory=dict)
    #: False: refused before any probe could start (nothing is judged, like a run slot
    #: or a snapshot the real backend could not have).
    launched: bool = True
    #: Seconds per phase the result reports; None: the phases the real runner reports
    #: for a launched probe (canary, launch, execute).
    phases: Mapping[str, float] | None = None
    #: The probe's wall time; None: the n-th execution of the stub took n ms, so two
    #: executions never commit the same receipt (two real ones never do either).
    elapsed_seconds: float | None = None


Answer = Callable[[Plan], Canned]


def by_last_arg(answers: Mapping[str, Canned], default: Canned | None = None) -> Answer:
    """Answer by the plan's last argument (the script of ``sh -c`` or the code of
    ``python3 -c``), looked up as text, never run; ``default`` (exit 0) otherwise."""
    fallback = default or Canned()

    def answer(plan: Plan) -> Canned:
        return answers.get(plan.args[-1], fallback) if plan.args else fallback

    return answer


class StubSandbox:
    """A ``SandboxBackend`` (and its located ``Sandbox``) answering canned results."""

    digest = STUB_SANDBOX_DIGEST

    def __init__(self, answer: Canned | Answer | None = None) -> None:
        self.answer: Answer = (
            answer if callable(answer) else (lambda _plan, canned=answer or Canned(): canned)
        )
        self._lock = threading.Lock()
        #: Every execution asked of the stub, in order (for tests that count them).
        self.executions: list[ExecutionRequest] = []

    def locate(self) -> StubSandbox:
        """The stub is always there."""
        return self

    @contextmanager
    def execute(self, request: ExecutionRequest) -> Iterator[Execution]:
        """Answer the canned result for the request's plan, in a scratch directory that
        holds only the canned files; nothing of the plan runs."""
        with self._lock:
            self.executions.append(request)
            count = len(self.executions)
        with tempfile.TemporaryDirectory(prefix="stub-sandbox-") as directory:
            workdir, scratch = Path(directory), Path(directory) / "scratch"
            # The stub's stand-in for materializing: two directories, no snapshot in them.
            with request.clock.timing("materialize"):
                (workdir / "snapshot").mkdir()
                scratch.mkdir()
            # The stub's launch is its answer: like the real backend's, it holds one of the
            # request's lanes, after materializing (docs/ARCHITECTURE.md, "Pipelined
            # worker"); an answer that blocks holds its lane while it blocks.
            with launch_lane(request):
                canned = self.answer(request.plan)
            if not canned.launched:
                yield Execution(refused_result(canned.reason or "sandbox_failed", canned.detail))
                return
            for name, content in canned.scratch_files.items():
                relative = PurePosixPath(name)
                if relative.is_absolute() or ".." in relative.parts:
                    raise ValueError(f"stub scratch file {name!r} leaves scratch")
                (scratch / relative).parent.mkdir(parents=True, exist_ok=True)
                (scratch / relative).write_bytes(content)
            yield Execution(_result(canned, request, count / 1000), workdir, scratch)


def _result(canned: Canned, request: ExecutionRequest, elapsed: float) -> SandboxResult:
    launched = canned.status != "inconclusive"
    if canned.elapsed_seconds is not None:
        elapsed = canned.elapsed_seconds
    phases = canned.phases
    if phases is None:
        phases = {"canary": 0.0, "launch": 0.0, "execute": elapsed}
    return SandboxResult(
        status=canned.status,
        reason=canned.reason,
        detail=canned.detail,
        exit_code=canned.exit_code,
        stdout=canned.stdout,
        stderr=canned.stderr,
        stdout_sha256=hashlib.sha256(canned.stdout).hexdigest() if launched else None,
        stderr_sha256=hashlib.sha256(canned.stderr).hexdigest() if launched else None,
        executable=_identity(request),
        sandbox_digest=STUB_SANDBOX_DIGEST,
        elapsed_seconds=elapsed,
        probe_elapsed_seconds=elapsed if launched else None,
        phases=dict(phases),
        launcher="stub",
    )


def _identity(request: ExecutionRequest) -> ExecutableIdentity | None:
    """The host file the plan names, as a real run records it (hashed, never run)."""
    try:
        return capture_identity(resolve_executable(request.policy, request.plan.executable))
    except (ProbeServiceError, OSError):
        return None
