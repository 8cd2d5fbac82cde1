"""Prepare one run before anything launches: arguments, working directory, executables.

docs/ARCHITECTURE.md, "Runner" and "Executables": every argument is checked against the
launch path, the working directory resolves inside the snapshot, and the probe's and each
preflight command's executable is resolved (admin pin or fixed system directories) with
its identity captured. A pin inside a toolchain is launched by its own path
("Toolchains"). Each refusal is a ``Refused`` carrying its ``inconclusive`` reason.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from probe_service.errors import ProbeServiceError, SandboxUnavailable
from probe_service.policies import (
    ExecutableIdentity,
    ExecutableNotAllowed,
    capture_identity,
    resolve_executable,
)
from probe_service.policies.model import Policy, toolchain_of_pin
from probe_service.sandbox.argsize import MAX_LAUNCH_ARG_BYTES, launch_arg_bytes
from probe_service.sandbox.mounts import HostMounts, Mounts
from probe_service.sandbox.settings import RunPaths
from probe_service.toolchains import ResolvedToolchain

__all__ = [
    "Command",
    "Prepared",
    "Refused",
    "RunRequest",
    "canonical_dir",
    "check_args",
    "prepare_run",
    "resolve_command",
    "resolve_cwd",
]


class Refused(SandboxUnavailable):
    """Internal signal: stop before launch with an ``inconclusive`` reason; the runner ends
    the run with it and nothing else sees it."""

    code = "launch_refused"

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail, reason=reason)


@dataclass(frozen=True)
class Command:
    """A resolved executable: its identity and the path the sandbox launches."""

    identity: ExecutableIdentity
    #: The pin itself when it lies in a toolchain (a virtualenv's ``bin/python`` finds
    #: its environment through that path), else the resolved file.
    launch_path: str
    args: tuple[str, ...]
    declared: tuple[str, ...]


@dataclass(frozen=True)
class Prepared:
    command: Command
    paths: RunPaths
    cwd: Path
    preflight: tuple[Command, ...] = ()
    extra_reads: tuple[Path, ...] = ()

    @property
    def executable(self) -> ExecutableIdentity:
        return self.command.identity


@dataclass(frozen=True)
class RunRequest:
    executable: str
    args: Sequence[str]
    snapshot_dir: Path
    scratch_dir: Path
    cwd: str
    forbidden: Sequence[Path]
    toolchains: Sequence[ResolvedToolchain]
    preflight: Sequence[Sequence[str]]
    #: Read-only allow-backs of the service's built-in profiles, never a plan's or policy's.
    extra_reads: tuple[Path, ...] = ()
    #: Held around each spawn, once its command is wrapped: the caller's launch lane
    #: (docs/ARCHITECTURE.md, "Pipelined worker"); None holds nothing.
    lane: Callable[[], AbstractContextManager[object]] | None = None


def canonical_dir(path: Path, what: str) -> Path:
    real = Path(os.path.realpath(path))
    if not real.is_dir():
        raise Refused("sandbox_failed", f"{what} {path} is not a directory")
    return real


def resolve_cwd(snapshot: Path, cwd: str, mounts: Mounts | None = None) -> Path:
    """``snapshot/cwd`` resolved as the run's mount namespace (``mounts``; the worker's own
    when None) shows the snapshot; raises ``Refused`` (``invalid_cwd``)."""
    # docs/ARCHITECTURE.md, "Runner": an invalid working directory returns inconclusive.
    if "\x00" in cwd or os.path.isabs(cwd):
        raise Refused("invalid_cwd", f"cwd {cwd!r} must be relative to the snapshot")
    seen = mounts or HostMounts()
    try:
        target = seen.realpath(snapshot / cwd)
    except OSError as exc:
        raise Refused("invalid_cwd", f"cwd {cwd!r}: {exc.strerror}") from exc
    inside = target == snapshot or snapshot in target.parents
    if not inside or not seen.view(target).is_dir():
        raise Refused("invalid_cwd", f"cwd {cwd!r} is not a directory inside the snapshot")
    return target


def check_args(args: Sequence[str]) -> None:
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


def resolve_command(
    policy: Policy, name: str, args: Sequence[str], roots: Sequence[Path]
) -> Command:
    check_args(args)
    try:
        resolved = resolve_executable(policy, name, roots)
        identity = capture_identity(resolved)
    except ExecutableNotAllowed as exc:
        raise Refused("executable_not_allowed", str(exc)) from exc
    except ProbeServiceError as exc:
        raise Refused("executable_unresolved", str(exc)) from exc
    pin = policy.executable_pins.get(name)
    in_toolchain = pin is not None and toolchain_of_pin(policy, pin) is not None
    launch_path = pin if pin is not None and in_toolchain else identity.path
    return Command(identity, launch_path, tuple(args), (name, *args))


def prepare_run(
    policy: Policy,
    request: RunRequest,
    dirs: tuple[Path, Path, Path],
    mounts: Mounts | None = None,
) -> Prepared:
    """Check and resolve one run before launch, its snapshot as ``mounts`` (the run slot's
    namespace) shows it; raises ``Refused``."""
    _, scratch, run_dir = dirs
    # Arguments first: a bad argument is the plan's fault whatever the directories are.
    for argv in (request.args, *request.preflight):
        check_args(argv)
    snapshot = canonical_dir(request.snapshot_dir, "snapshot")
    if snapshot == scratch or snapshot in scratch.parents or scratch in snapshot.parents:
        # Overlap would make the source writable or the scratch read-only.
        raise Refused("sandbox_failed", "snapshot and scratch directories overlap")
    work_dir = resolve_cwd(snapshot, request.cwd, mounts)
    roots = [snapshot, scratch, *request.forbidden]
    command = resolve_command(policy, request.executable, request.args, roots)
    preflight = tuple(
        resolve_command(policy, argv[0], argv[1:], roots) if argv else _empty_preflight()
        for argv in request.preflight
    )
    paths = RunPaths(snapshot, scratch, run_dir / "home", run_dir / "tmp")
    return Prepared(command, paths, work_dir, preflight, request.extra_reads)


def _empty_preflight() -> Command:
    raise Refused("invalid_argument", "a preflight command is an empty argument array")
