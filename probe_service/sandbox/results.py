"""The frozen result of one sandboxed probe run, and its machine-readable reasons."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from probe_service.policies.executables import ExecutableIdentity

__all__ = ["REASONS", "LimitsApplied", "PreflightResult", "Reason", "SandboxResult", "Status"]

Status = Literal["ok", "timeout", "output_limit", "inconclusive"]

#: Every reason an ``inconclusive`` result can carry (architecture: never a fallback).
Reason = Literal[
    "sandbox_unverified",
    "sandbox_prerequisite_missing",
    "unsupported",
    "canary_readable",
    "executable_not_allowed",
    "executable_unresolved",
    "executable_changed",
    "invalid_cwd",
    "invalid_argument",
    # A passed search path (PATH, PYTHONPATH...) had an empty or relative entry, which would
    # find repository files first (docs/ARCHITECTURE.md, "Probe environment").
    "unsafe_search_path",
    # The plan sets an environment name its policy does not list under plan_environment
    # (the policy changed since the plan was made, or the plan was made without it).
    "environment_not_allowed",
    "scratch_limit",
    "memory_limit",
    "process_limit",
    "cpu_limit",
    "limits_unenforceable",
    "limits_unverified",
    "identity_unverified",
    # docs/ARCHITECTURE.md, "Mount namespaces": the run slot's private mount namespace could
    # not be made, checked or entered; nothing ran in the host's namespace instead.
    "slot_namespace_failed",
    "sandbox_failed",
    # The runtime's Node process ran without our network guard (docs/ARCHITECTURE.md, "Network").
    "network_filter_failed",
    # docs/ARCHITECTURE.md, "Toolchains": a toolchain could not be resolved, or its content
    # differs at launch from the digest taken at resolution.
    "toolchain_unavailable",
    "toolchain_changed",
    # docs/ARCHITECTURE.md, "Preflight": a preflight command failed; the probe never ran.
    "preflight_failed",
    # Set by the plan runner and the queue around a sandbox run, never by the runner itself.
    "snapshot_unavailable",
    "snapshot_link_escapes",
    "overlay_failed",
    "worker_lost",
    # A defect caught by the plan runner or the worker: the run still ends with a receipt.
    "internal_error",
]
REASONS: tuple[str, ...] = Reason.__args__  # type: ignore[attr-defined]


class LimitsApplied(BaseModel):
    """The limits the kernel or the runner enforced during the run, and what enforced each.

    Only limits that were actually in force are recorded (docs/ARCHITECTURE.md,
    "Limits"); ``enforced_by`` names the mechanism of each.
    """

    model_config = ConfigDict(frozen=True)

    mechanism: str
    timeout_seconds: int
    max_output_bytes: int
    cpu_seconds: int
    memory_bytes: int | None
    max_processes: int | None
    scratch_bytes: int | None
    file_size_bytes: int | None
    scratch_inodes: int | None = None
    #: ``RLIMIT_NOFILE`` of every probe process.
    max_open_files: int | None = None
    #: Kernel TCP buffers the probe group may pin (charged apart from ``memory_bytes``).
    tcp_buffer_bytes: int | None = None
    #: Tasks the runtime's socat relays may use, a budget apart from ``max_processes``.
    relay_tasks: int | None = None
    enforced_by: dict[str, str] = {}


class PreflightResult(BaseModel):
    """One preflight command's run (docs/ARCHITECTURE.md, "Preflight")."""

    model_config = ConfigDict(frozen=True)

    argv: tuple[str, ...]
    executable: ExecutableIdentity | None = None
    status: str
    exit_code: int | None = None
    stdout: bytes = b""
    stderr: bytes = b""
    stdout_sha256: str | None = None
    stderr_sha256: str | None = None
    elapsed_seconds: float | None = None

    @property
    def passed(self) -> bool:
        """Whether the command ran to completion in the sandbox and exited 0."""
        return self.status == "ok" and self.exit_code == 0

    def committed(self) -> dict[str, object]:
        """What a receipt commits to for this command (its output is kept beside it)."""
        return {
            "argv": list(self.argv),
            "executable": self.executable.model_dump() if self.executable else None,
            "status": self.status,
            "exit_code": self.exit_code,
            "stdout_sha256": self.stdout_sha256,
            "stderr_sha256": self.stderr_sha256,
        }


class SandboxResult(BaseModel):
    """Everything a receipt needs from one run; bytes are bounded by the policy's budget."""

    model_config = ConfigDict(frozen=True)

    status: Status
    reason: Reason | None = None
    detail: str = ""
    exit_code: int | None = None
    stdout: bytes = b""
    stderr: bytes = b""
    stdout_sha256: str | None = None
    stderr_sha256: str | None = None
    executable: ExecutableIdentity | None = None
    sandbox_digest: str | None = None
    settings_digest: str | None = None
    limits: LimitsApplied | None = None
    #: Wall time of the whole call (verification, canary, probe), time.monotonic.
    elapsed_seconds: float = 0.0
    #: Wall time of the probe launch alone, time.monotonic; None if it never launched.
    probe_elapsed_seconds: float | None = None
    #: Seconds per phase the runner saw (``canary``, ``launch``, ``execute``): operational,
    #: never committed (docs/ARCHITECTURE.md, "Phase timings").
    phases: dict[str, float] = {}
    #: The probe group's memory high-water mark in bytes over the probe's own command
    #: (preflight excluded): operational, never committed (docs/ARCHITECTURE.md, "Limits").
    memory_peak_bytes: int | None = None
    #: ``helper`` (the persistent launcher) or ``cli`` (srt per command) when it launched.
    launcher: str | None = None
    #: The plan's preflight commands that ran, in order (docs/ARCHITECTURE.md, "Preflight").
    preflight: tuple[PreflightResult, ...] = ()
