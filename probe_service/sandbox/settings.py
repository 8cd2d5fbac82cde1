"""Generate the Sandbox Runtime 0.0.55 settings for one run.

Field names are those of 0.0.55's zod schema
(``dist/sandbox/sandbox-config.js``): ``network.{allowedDomains, deniedDomains,
strictAllowlist, allowLocalBinding, allowAllUnixSockets}``,
``filesystem.{denyRead, allowRead, allowWrite, denyWrite}``, ``bwrapPath``,
``socatPath``, ``ripgrep.command``, ``seccomp.applyPath``,
``mandatoryDenySearchDepth``.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from probe_service.policies import Policy, canonical_json
from probe_service.sandbox.runtime import SandboxRuntime

__all__ = [
    "HIDDEN_SYS_PATHS",
    "RUNTIME_DEFAULT_WRITE_PATHS",
    "SYSTEM_READ_PATHS",
    "RunPaths",
    "build_settings",
    "runtime_default_write_paths",
    "write_settings",
]

#: System paths read back inside the root read deny: code, loader, shared
#: libraries, time zone and the name-service files programs expect. Never
#: ``/root``, ``/home``, ``/etc/shadow``, ``/etc/ssl/private``, ``/tmp`` or ``/var``
#: (root-only files stay unlisted even though the probe's uid cannot read them).
SYSTEM_READ_PATHS: tuple[str, ...] = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/alternatives",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/hosts",
    "/etc/ssl/certs",
    "/etc/ssl/openssl.cnf",
    "/etc/ca-certificates",
    "/etc/python3",
    "/etc/python3.11",
)

#: Parts of ``/sys`` the runtime leaves visible that tell a probe about the host
#: and other runs (firmware tables, every run's cgroup and memory use): hidden
#: under an empty tmpfs. docs/ARCHITECTURE.md, "Containment".
HIDDEN_SYS_PATHS: tuple[str, ...] = ("/sys/fs/cgroup", "/sys/firmware")

#: Paths 0.0.55 makes writable on every run (``getDefaultWritePaths`` in
#: ``dist/sandbox/sandbox-utils.js``); those that exist are bind-mounted
#: read-write, so each is listed in ``denyWrite``. ``~`` is the runtime's HOME,
#: which we point at a per-run directory. ``/dev/*`` entries are skipped by the
#: runtime itself (``--dev /dev`` is a fresh in-sandbox tmpfs).
RUNTIME_DEFAULT_WRITE_PATHS: tuple[str, ...] = (
    "/tmp/claude",  # noqa: S108 - the runtime's hard-coded default, listed to deny it
    "/private/tmp/claude",
    "~/.npm/_logs",
    "~/.claude/debug",
)


@dataclass(frozen=True)
class RunPaths:
    """Host paths of one run; all absolute and canonical."""

    snapshot: Path
    scratch: Path
    runtime_home: Path
    runtime_tmp: Path


def runtime_default_write_paths(runtime_home: Path) -> list[str]:
    """Return the runtime's default write paths, with ``~`` expanded for us and for it."""
    homes = {str(runtime_home), str(Path.home())}
    paths: list[str] = []
    for entry in RUNTIME_DEFAULT_WRITE_PATHS:
        if entry.startswith("~/"):
            paths += sorted(home + entry[1:] for home in homes)
        else:
            paths.append(entry)
    return paths


def _read_backs(
    runtime: SandboxRuntime, paths: RunPaths, executable: Path, extra: Sequence[Path]
) -> list[str]:
    allowed = [p for p in SYSTEM_READ_PATHS if os.path.lexists(p)]
    # A built-in profile's own verified program (docs/ARCHITECTURE.md, "TypeScript
    # boundary"), toolchain roots and preflight executables' directories ("Toolchains"):
    # read and execute, never write.
    allowed += [str(path) for path in extra]
    # The executable's own directory, for an admin pin outside the system dirs.
    allowed.append(str(executable.parent))
    if runtime.apply_seccomp_path is not None:
        allowed.append(str(runtime.apply_seccomp_path.parent))
    # The runtime's TMPDIR holds the socat bridge sockets the in-sandbox
    # listeners connect to; seccomp stops the probe from opening unix sockets.
    allowed += [str(paths.runtime_tmp), str(paths.snapshot), str(paths.scratch)]
    return list(dict.fromkeys(allowed))


def build_settings(
    policy: Policy,
    runtime: SandboxRuntime,
    paths: RunPaths,
    executable: Path,
    toolchains: Sequence[Path] = (),
    extra_executables: Sequence[Path] = (),
    extra_read_paths: tuple[Path, ...] = (),
) -> dict[str, Any]:
    """Return the runtime settings for one run of ``policy`` (pure; raises nothing).

    ``toolchains`` are read-only roots the policy names; ``extra_executables`` (preflight
    commands) get their directories read back like the probe's executable;
    ``extra_read_paths`` are read-only allow-backs only the service's built-in profiles
    pass (never a plan or a policy file).
    """
    extra = [*extra_read_paths, *toolchains, *(path.parent for path in extra_executables)]
    settings: dict[str, Any] = {
        "network": {
            "allowedDomains": list(policy.allowed_domains),
            "deniedDomains": [],
            # docs/ARCHITECTURE.md, "Network": the domain list is enforcement, never a prompt hint.
            "strictAllowlist": True,
            "allowLocalBinding": False,
            "allowAllUnixSockets": False,
            # No parentProxy or mitmProxy: the runtime dials directly, and every dial
            # is checked by address and port in its own process by net-guard.cjs
            # (docs/ARCHITECTURE.md, "Network").
        },
        "filesystem": {
            # docs/ARCHITECTURE.md, "Trust rules": a root read deny with narrow allow-backs.
            "denyRead": ["/", *HIDDEN_SYS_PATHS],
            "allowRead": _read_backs(runtime, paths, executable, extra),
            "allowWrite": [str(paths.scratch)],
            "denyWrite": [
                str(paths.snapshot),
                *map(str, extra_read_paths),
                *(str(root) for root in toolchains),
                *runtime_default_write_paths(paths.runtime_home),
            ],
        },
        "mandatoryDenySearchDepth": 1,
        "enableWeakerNestedSandbox": False,
    }
    if runtime.bwrap_guard_path is not None:
        # docs/ARCHITECTURE.md, "Limits": our guard runs the real bubblewrap with the run's
        # seccomp filter and every place outside scratch read-only.
        settings["bwrapPath"] = str(runtime.bwrap_guard_path)
    if runtime.socat_path is not None:
        settings["socatPath"] = str(runtime.socat_path)
    if runtime.rg_path is not None:
        settings["ripgrep"] = {"command": str(runtime.rg_path)}
    if runtime.apply_seccomp_path is not None:
        settings["seccomp"] = {"applyPath": str(runtime.apply_seccomp_path)}
    return settings


def write_settings(settings: dict[str, Any], target: Path) -> str:
    """Write ``settings`` as canonical JSON to ``target``; return its SHA-256 hex digest."""
    payload = canonical_json(settings)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(payload)
    return hashlib.sha256(payload).hexdigest()
