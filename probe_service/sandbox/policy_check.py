"""What ``policy check`` verifies beyond the file itself: every pin and every toolchain,
and that no run of a policy could fill one of this machine's host-wide tables.

docs/ARCHITECTURE.md, "Toolchains": each pin exists and is a regular executable file,
each toolchain root is a directory that keeps the safety rules, and the probe uids can
reach both -- a toolchain under ``/root`` is refused here, naming the ancestor that stops
them, instead of surfacing later as a probe's ``No module named ...``. "Limits": a
policy whose ``max_processes x max_open_files`` (or tasks) exceeds half of this machine's
``fs.file-max`` (``kernel.pid_max``, ``kernel.threads-max``) is refused here as each of
its runs would be.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ..envnames import RUNNER_OWNED
from ..errors import PolicyError, ProbeServiceError, SandboxUnavailable
from ..policies import Policy, capture_identity, load_policy_file, policy_digest, resolve_executable
from ..policies.model import toolchain_of_pin
from ..toolchains import resolve_toolchains
from .host_tables import host_table_problem
from .identity import PROBE_SLOTS, PROBE_UID_BASE, check_reachable
from .limits import LAUNCHER_TASKS, RELAY_TASKS

__all__ = [
    "PinReport",
    "PolicyReport",
    "ToolchainReport",
    "environment_warnings",
    "verify_policy_file",
]


class PinReport(BaseModel):
    """One pinned executable: where it points and its content digest."""

    model_config = ConfigDict(frozen=True)

    executable: str
    pin: str
    resolved: str
    sha256: str
    toolchain: str | None


class ToolchainReport(BaseModel):
    """One toolchain: its root, digest and size."""

    model_config = ConfigDict(frozen=True)

    name: str
    path: str
    sha256: str
    files: int
    bytes: int
    external: list[dict[str, str | None]]


class PolicyReport(BaseModel):
    """One verified policy."""

    model_config = ConfigDict(frozen=True)

    id: str
    digest: str
    pins: list[PinReport]
    toolchains: list[ToolchainReport]
    #: What the file allows but an administrator may not mean (never a refusal).
    warnings: list[str] = []


def environment_warnings(policy: Policy) -> list[str]:
    """A warning when the policy passes worker values that reach the action key.

    docs/ARCHITECTURE.md, "Probe environment": such a value is the worker's, so the same
    plan has another action key (and another receipt) on another worker or face. The names
    the runner sets itself and the proxy variables never reach the key.
    """
    keyed = [
        name
        for name in policy.passthrough_environment
        if name not in RUNNER_OWNED and not name.lower().endswith("_proxy")
    ]
    if not keyed:
        return []
    names = ", ".join(keyed)
    return [
        f"environment: {names} pass the worker's value, so a run's action key and its probe "
        "depend on which worker or face runs it; fix the values in an environment object "
        '(schema 3, e.g. {"LANG": "C.UTF-8"}) for answers that do not depend on who asked'
    ]


def _reachable(path: Path, what: str) -> None:
    # Every slot uid is "other" to a root-owned tree, so the first slot stands for all.
    try:
        check_reachable(path, what, uid=PROBE_UID_BASE, gid=PROBE_UID_BASE)
    except SandboxUnavailable as exc:
        last = PROBE_UID_BASE + PROBE_SLOTS - 1
        raise PolicyError(
            f"{exc} -- probes run as uids {PROBE_UID_BASE}-{last}, which must be able to "
            "search every ancestor and read the tree (put it under e.g. /opt, mode 0755)"
        ) from exc


def _pin(policy: Policy, executable: str, pin: str) -> PinReport:
    try:
        resolved = resolve_executable(policy, executable)
        identity = capture_identity(resolved)
    except ProbeServiceError as exc:
        raise PolicyError(f"pin for {executable!r} ({pin}): {exc}") from exc
    _reachable(Path(pin), f"pin for {executable!r}")
    _reachable(resolved, f"pin for {executable!r}")
    return PinReport(
        executable=executable,
        pin=pin,
        resolved=str(resolved),
        sha256=identity.sha256,
        toolchain=toolchain_of_pin(policy, pin),
    )


def _verify(policy: Policy) -> PolicyReport:
    crowded = host_table_problem(policy, extra_tasks=LAUNCHER_TASKS + RELAY_TASKS)
    if crowded is not None:
        raise PolicyError(crowded)
    toolchains = []
    for resolved in resolve_toolchains(policy):
        _reachable(Path(resolved.path), f"toolchain {resolved.name!r}")
        if resolved.digest.unreadable:
            raise PolicyError(
                f"toolchain {resolved.name!r} ({resolved.path}): entries other users cannot "
                f"read, so the probe cannot either: {', '.join(resolved.digest.unreadable)}"
            )
        toolchains.append(
            ToolchainReport(
                name=resolved.name,
                path=resolved.path,
                sha256=resolved.digest.sha256,
                files=resolved.digest.files,
                bytes=resolved.digest.bytes,
                external=[target.model_dump() for target in resolved.digest.external],
            )
        )
    pins = [_pin(policy, name, pin) for name, pin in sorted(policy.executable_pins.items())]
    return PolicyReport(
        id=policy.id,
        digest=policy_digest(policy),
        pins=pins,
        toolchains=toolchains,
        warnings=environment_warnings(policy),
    )


def verify_policy_file(path: Path) -> list[PolicyReport]:
    """Load ``path`` and verify every policy's pins and toolchains.

    Raises ``PolicyError`` naming the file, the policy and the pin or toolchain at fault.
    """
    policy_file = load_policy_file(path)
    reports = []
    for policy in policy_file.policies:
        try:
            reports.append(_verify(policy))
        except PolicyError as exc:
            raise PolicyError(f"{path}: policy {policy.id!r}: {exc}") from exc
    return reports
