"""The canary: before every probe, prove the exact settings hide a fresh host secret.

docs/ARCHITECTURE.md, "Canary": "a canary launches through the exact generated settings and must
fail to read a fresh host-side secret outside HOME; this detects the runtime's
permissive invalid-settings fallback" (srt 0.0.55 given a missing or invalid
settings file prints a message and runs the command with no filesystem limit).
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from probe_service.sandbox.launch import Launch
from probe_service.sandbox.limits import RunCgroup
from probe_service.sandbox.process import Bounded, StartHook, run_bounded
from probe_service.sandbox.runtime import find_system_tool

__all__ = [
    "CANARY_ENV",
    "CANARY_SCRIPT",
    "CANARY_SHELL",
    "CANARY_TIMEOUT_SECONDS",
    "CanaryVerdict",
    "identity_problems",
    "limits_problems",
    "never_started",
    "run_canary",
]

#: A fixed system shell, launched exactly the way the probe will be.
CANARY_SHELL = "/bin/sh"
CANARY_TIMEOUT_SECONDS = 30
_BUDGET = 64 * 1024


@dataclass(frozen=True)
class CanaryVerdict:
    """``held`` is True only if every check passed: the secret stayed hidden and the identity holds.

    Otherwise ``reason`` is ``canary_readable`` (the secret was readable),
    ``identity_unverified`` (the probe would be host root, share a host
    namespace, or reach what it must not), ``network_filter_failed`` when the
    runtime ran without our network guard, ``limits_unverified`` when our
    bubblewrap guard did not run or a place outside scratch is writable, or
    ``sandbox_failed`` when the sandboxed shell never started (so nothing was
    proven either way).
    """

    held: bool
    reason: str | None
    detail: str
    #: The sandbox failed before its shell started, and not by spending its start-up bound:
    #: nothing ran, so one more launch is safe (docs/ARCHITECTURE.md, "Canary").
    may_retry: bool = False


#: What the canary reports, one ``key=value`` per line; ``$1`` is the secret's path and
#: ``$2`` the absolute path of ``readlink``. docs/ARCHITECTURE.md, "Containment": the
#: identity is proven, not assumed; "Canary": every check is a shell builtin or a fixed
#: absolute path, run from ``/``, so no file of the repository can answer for it.
CANARY_SCRIPT = """
cd / || exit 125
if IFS= read -r secret < "$1" || [ -n "$secret" ]; then printf '%s\\n' "$secret"; \
echo secret_rc=0; else echo secret_rc=1; fi
while read -r inside outside count; do echo "uid_map=$inside:$outside:$count"; \
done < /proc/self/uid_map
for ns in user ipc uts cgroup net mnt pid; do echo "ns_$ns=$("$2" /proc/self/ns/$ns)"; done
if (exec 3>>/proc/sys/kernel/core_pattern) 2>/dev/null; then echo sysctl=writable; \
else echo sysctl=denied; fi
for dir in /sys/fs/cgroup /sys/firmware; do \
for entry in "$dir"/* "$dir"/.[!.]* "$dir"/..?*; do \
if [ -e "$entry" ] || [ -h "$entry" ]; then echo "visible=$dir"; break; fi; done; done
for dir in / /* /dev /dev/pts /sys/fs/cgroup /sys/firmware; do case $dir in /proc|/sys) ;; \
*) if true 2>/dev/null > "$dir/.byte-probe-canary"; then echo "writable=$dir"; fi;; esac; done
while read -r key value; do case $key in Seccomp_filters:) echo "seccomp_filters=$value";; \
esac; done < /proc/self/status
"""
#: The canary's whole environment: never the probe's (a policy may pass ``PATH``).
CANARY_ENV: dict[str, str] = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}
NAMESPACES = ("user", "ipc", "uts", "cgroup", "net", "mnt", "pid")


def _readlink() -> Path:
    found = find_system_tool("readlink")
    if found is None:
        raise OSError("readlink not found in fixed system directories")
    return found


def _secret_dir(allowed_roots: Sequence[Path]) -> Path:
    # Outside HOME and outside every allowed path, in the host's temp dir.
    directory = Path(tempfile.mkdtemp(prefix="byte-probe-canary-"))
    # World-readable on purpose: only the sandbox, not file modes or the
    # probe's dropped uid, may be what stops the reader.
    directory.chmod(0o755)
    real = Path(os.path.realpath(directory))
    home = Path(os.path.realpath(Path.home()))
    for root in [home, *allowed_roots]:
        if real == root or root in real.parents:
            shutil.rmtree(directory)
            raise OSError(f"canary dir {real} falls inside {root}")
    return directory


def _report(stdout: bytes) -> dict[str, list[str]]:
    report: dict[str, list[str]] = {}
    for line in stdout.decode("utf-8", "replace").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            report.setdefault(key, []).append(value)
    return report


def identity_problems(report: dict[str, list[str]], expected_uid: int | None) -> list[str]:
    """Return what the canary's report shows wrong with the probe's identity (empty if none)."""
    problems = []
    maps = report.get("uid_map", [])
    outside = [entry.split(":")[1] for entry in maps if entry.count(":") == 2]
    if not maps or "0" in outside or (expected_uid is not None and outside != [str(expected_uid)]):
        problems.append(f"uid map {maps} does not map the probe to one unprivileged host uid")
    for ns in NAMESPACES:
        host = os.readlink(f"/proc/self/ns/{ns}")
        seen = report.get(f"ns_{ns}", [])
        if len(seen) != 1 or seen[0] in ("", host):
            problems.append(f"{ns} namespace is the host's (or was not reported)")
    if report.get("sysctl") != ["denied"]:
        problems.append("/proc/sys/kernel/core_pattern is writable")
    problems += [f"{path} is readable" for path in report.get("visible", [])]
    return problems


def limits_problems(report: dict[str, list[str]], seccomp_filters: int | None) -> list[str]:
    """Return what the canary's report shows of a kernel limit not in force (empty if none):
    a place outside scratch that took a file, or not the expected number of seccomp filters
    (docs/ARCHITECTURE.md, "Limits": kernel resources)."""
    problems = [f"{path} is writable" for path in report.get("writable", [])]
    seen = report.get("seccomp_filters", [])
    if seccomp_filters is not None and seen != [str(seccomp_filters)]:
        problems.append(f"the probe runs under seccomp filters {seen}, not {seccomp_filters}")
    return problems


def never_started(outcome: Bounded, launch: Launch) -> bool:
    """Whether bubblewrap or the runtime failed before the sandboxed shell printed its start
    marker, so nothing of the command ran, other than by spending the start-up bound.

    A path the runtime saw while wrapping that is gone when bubblewrap binds it (its default
    write path ``/tmp/claude``, which any local account may create and remove) fails a
    launch this way; one more launch is safe (docs/ARCHITECTURE.md, "Canary"). The
    runtime's unguarded marker is never such a failure: it is a finding.
    """
    seen = outcome.prefix
    if seen == launch.nonce.encode("ascii") or launch.guard_failure(seen) is not None:
        return False
    return outcome.status not in ("start_timeout", "start_failed")


def run_canary(
    launch: Launch,
    allowed_roots: Sequence[Path] = (),
    cgroup: RunCgroup | None = None,
    *,
    expected_uid: int | None = None,
    on_start: StartHook | None = None,
) -> CanaryVerdict:
    """Try to read a fresh secret through ``launch`` and prove the probe's identity.

    Raises ``OSError`` if it cannot start.
    """
    directory = _secret_dir([Path(os.path.realpath(root)) for root in allowed_roots])
    try:
        secret = secrets.token_hex(32).encode("ascii")
        target = directory / "secret"
        target.write_bytes(secret)
        target.chmod(0o644)
        args = ["-c", CANARY_SCRIPT, "canary", str(target), str(_readlink())]
        outcome = run_bounded(
            replace(launch, probe_env=CANARY_ENV).argv(CANARY_SHELL, args),
            env=launch.runtime_env,
            cwd=launch.spawn_cwd,
            timeout_seconds=CANARY_TIMEOUT_SECONDS,
            budget=_BUDGET,
            skip_stdout_prefix=len(launch.nonce),
            cgroup=cgroup,
            start_marker=launch.nonce.encode("ascii"),
            on_start=on_start,
        )
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    leaked = secret in outcome.prefix + outcome.stdout + outcome.stderr
    if leaked:
        return CanaryVerdict(False, "canary_readable", "the canary read the host secret")
    guard = launch.guard_failure(outcome.prefix)
    if guard is not None:
        return CanaryVerdict(False, *guard)
    if outcome.prefix != launch.nonce.encode("ascii") or outcome.status.startswith("start_"):
        detail = outcome.start_detail or "the sandboxed canary never started"
        tail = outcome.stderr[-300:].decode("utf-8", "replace").strip()
        text = f"{detail}: {tail!r}" if tail else detail
        return CanaryVerdict(False, "sandbox_failed", text, never_started(outcome, launch))
    report = _report(outcome.stdout)
    if outcome.status != "ok" or report.get("secret_rc", ["0"]) == ["0"]:
        detail = f"canary reader did not fail ({outcome.status}, exit {outcome.exit_code})"
        return CanaryVerdict(False, "canary_readable", detail)
    problems = identity_problems(report, expected_uid)
    if problems:
        return CanaryVerdict(False, "identity_unverified", "; ".join(problems))
    problems = limits_problems(report, launch.seccomp_filters)
    if problems:
        return CanaryVerdict(False, "limits_unverified", "; ".join(problems))
    return CanaryVerdict(True, None, "")
