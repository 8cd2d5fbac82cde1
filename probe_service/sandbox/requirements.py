"""What a worker's host must grant the containment, checked the way a run uses it.

docs/ARCHITECTURE.md, "Containment" and "Storage and deployment"; SECURITY.md, "Deployment
requirements". A farm worker runs as root, in a container or a systemd unit whose
capability grant is exactly ``REQUIRED_CAPABILITIES`` (compose.yaml's ``cap_add``, the
unit's ``CapabilityBoundingSet``; tests/deploy holds both to this table). ``byte-probe
doctor`` reports each requirement, and the image's entrypoint and the unit's
``ExecStartPre`` refuse to start a worker whose doctor fails.

The limits are cgroup v1 only (``limits.py``); ``cgroup_support`` is the one place that
tells the versions apart, so a cgroup v2 implementation of the limits has one switch to
hang on.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from probe_service.errors import SandboxUnavailable
from probe_service.sandbox.runtime import SandboxRuntime

__all__ = [
    "LAUNCH_NEEDS",
    "REQUIRED_CAPABILITIES",
    "CgroupSupport",
    "cgroup_support",
    "check_sandboxed_launch",
    "missing_capabilities",
]

#: Every capability a root worker uses, and why (docs/ARCHITECTURE.md, "Storage and
#: deployment"). Without any of the first nine a real run fails (tests/deploy removes each
#: in turn); no current run fails without the last two, which keep what they guard: the
#: launcher's empty bounding set, and sweeps of slot-owned trees lacking owner permissions.
#: Nothing else is needed.
REQUIRED_CAPABILITIES: dict[str, str] = {
    "CAP_SYS_ADMIN": (
        "mount each run's scratch tmpfs and snapshot overlay; make and enter each slot's "
        "mount namespace and the launcher's ipc/uts/cgroup namespaces"
    ),
    "CAP_SYS_CHROOT": "nsenter --mount into a slot's namespace (setns needs it)",
    "CAP_SYS_PTRACE": "the start gate finds the probe's waiting shell through /proc/PID/fd",
    "CAP_NET_ADMIN": (
        "the limits' self-check runs bubblewrap as root with its own network namespace, "
        "whose loopback it brings up"
    ),
    "CAP_SETUID": "setpriv --reuid to the run's slot uid",
    "CAP_SETGID": "setpriv --regid and --clear-groups to the run's slot gid",
    "CAP_KILL": "kill a slot uid's leftovers and every process of a run's cgroups",
    "CAP_CHOWN": "hand run directories, scratch and the start gate to the run's slot uid",
    "CAP_DAC_OVERRIDE": (
        "write cgroup directories without an owner write bit and remove the slot uids' files"
    ),
    "CAP_SETPCAP": (
        "setpriv --bounding-set=-all empties the launcher's bounding set "
        "(without it the drop is skipped silently)"
    ),
    "CAP_FOWNER": (
        "a sweep chmods a slot uid's directory lacking owner rwx before removing it (fstree)"
    ),
}
#: Those whose absence fails a real sandboxed run (the first nine above).
LAUNCH_NEEDS = tuple(REQUIRED_CAPABILITIES)[:9]

#: Bit numbers of the capabilities above (linux/capability.h).
_CAPABILITY_BITS = {
    "CAP_CHOWN": 0,
    "CAP_DAC_OVERRIDE": 1,
    "CAP_FOWNER": 3,
    "CAP_KILL": 5,
    "CAP_SETGID": 6,
    "CAP_SETUID": 7,
    "CAP_SETPCAP": 8,
    "CAP_NET_ADMIN": 12,
    "CAP_SYS_CHROOT": 18,
    "CAP_SYS_PTRACE": 19,
    "CAP_SYS_ADMIN": 21,
}
_CGROUP_ROOT = Path("/sys/fs/cgroup")
_PROC_CGROUP = Path("/proc/self/cgroup")
_CONTROLLERS = ("memory", "pids")


def _effective_mask(status: Path) -> int:
    for line in status.read_text(encoding="ascii").splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    raise OSError(f"{status}: no CapEff line")


def missing_capabilities(status: Path = Path("/proc/self/status")) -> dict[str, str]:
    """The required capabilities this process does not hold, each with why it is needed;
    raises ``OSError`` when ``status`` cannot be read."""
    mask = _effective_mask(status)
    return {
        name: why
        for name, why in REQUIRED_CAPABILITIES.items()
        if not mask & (1 << _CAPABILITY_BITS[name])
    }


@dataclass(frozen=True)
class CgroupSupport:
    """Which cgroup version this process sees, and whether the limits can use it."""

    version: str
    supported: bool
    detail: str


def _v1_groups(proc_cgroup: Path, root: Path) -> dict[str, Path | None]:
    """This process's own v1 group per controller we use (None when not mounted)."""
    found: dict[str, Path | None] = dict.fromkeys(_CONTROLLERS)
    for line in proc_cgroup.read_text(encoding="ascii").splitlines():
        _, names, path = line.split(":", 2)
        for controller in set(names.split(",")) & set(_CONTROLLERS):
            group = root / controller / path.lstrip("/")
            found[controller] = group if group.is_dir() else None
    return found


def cgroup_support(root: Path | None = None, proc_cgroup: Path | None = None) -> CgroupSupport:
    """Tell cgroup v1, hybrid and v2 apart (below ``root``, for the process whose
    ``/proc/PID/cgroup`` is ``proc_cgroup``; this one's by default) and say whether the run
    limits work there; raises ``OSError`` when ``proc_cgroup`` cannot be read."""
    root = root or _CGROUP_ROOT
    proc_cgroup = proc_cgroup or _PROC_CGROUP
    if (root / "cgroup.controllers").exists():
        return CgroupSupport(
            "v2",
            False,
            "cgroup v2 (unified): run limits are not supported on cgroup v2 yet; memory and "
            "pids are enforced through cgroup v1 hierarchies only",
        )
    groups = _v1_groups(proc_cgroup, root)
    hybrid = (root / "unified" / "cgroup.controllers").exists()
    version = "v1 (hybrid)" if hybrid else "v1"
    missing = [name for name, group in groups.items() if group is None]
    if missing:
        detail = f"cgroup {version}: no {' or '.join(missing)} hierarchy holds this process"
        return CgroupSupport(version, False, detail)
    places = ", ".join(f"{name} {group}" for name, group in groups.items())
    return CgroupSupport(version, True, f"cgroup {version}: {places}")


#: The probe doctor launches runs past its timeout, so the runner must stop a slot uid's
#: processes, as it stops every probe that overruns (a deterministic use of each grant).
_LAUNCH_TIMEOUT_S = 1


def check_sandboxed_launch(runtime: SandboxRuntime) -> str:
    """Run a probe in the sandbox as a run does (a slot uid, its slot's namespace, the gate,
    the canary) until the runner stops it at its timeout, and describe it; raises
    ``SandboxUnavailable`` with the run's reason when it did not run or was not stopped."""
    from probe_service.policies import Policy
    from probe_service.sandbox.runner import run_sandboxed

    policy = Policy.model_validate(
        {
            "id": "doctor-launch",
            "allowed_executables": ["sleep"],
            "timeout_seconds": _LAUNCH_TIMEOUT_S,
            "max_output_bytes": 4096,
            "allowed_domains": [],
            "environment": [],
        }
    )
    with tempfile.TemporaryDirectory(prefix="byte-probe-doctor-") as work:
        # The slot uid must pass through to the (empty) snapshot: nothing here is secret.
        os.chmod(work, 0o755)  # noqa: S103
        snapshot, scratch = Path(work) / "snapshot", Path(work) / "scratch"
        snapshot.mkdir()
        scratch.mkdir()
        result = run_sandboxed(
            policy=policy,
            executable="sleep",
            args=["60"],
            snapshot_dir=snapshot,
            scratch_dir=scratch,
            runtime=runtime,
            environment={},  # the check's policy passes no environment name
        )
    if result.status != "timeout":
        detail = result.detail or f"status {result.status}, exit code {result.exit_code}"
        raise SandboxUnavailable(
            f"a sandboxed probe did not run and stop: {detail}",
            reason=result.reason or "sandbox_failed",
        )
    return (
        "a probe ran as a slot uid in its slot's namespace and was stopped at its "
        f"{_LAUNCH_TIMEOUT_S} s timeout ({result.launcher} launcher)"
    )
