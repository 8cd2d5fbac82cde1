"""The canary, inside the probe's own sandbox instance: before repository code runs, prove
the exact settings hide a fresh host secret and the identity, namespaces and limits hold.

docs/ARCHITECTURE.md, "Canary": "a canary launches through the exact generated settings and must
fail to read a fresh host-side secret outside HOME; this detects the runtime's
permissive invalid-settings fallback" (srt 0.0.55 given a missing or invalid
settings file prints a message and runs the command with no filesystem limit).

Every launch of a run is one instance: its sandboxed shell first runs the canary's checks
(``CANARY_CHECKS``, builtins and fixed absolute paths, from ``/``) in a subshell whose
output goes to the verdict channel, a FIFO the runner holds the reading end of; the
subshell has exited, and so closed the channel, before the shell prints the start marker.
Seeing the marker, the runner reads the channel to its end without waiting (a writer still
holding it is a failure), removes it, judges the report, and only if it held moves the
shell into the probe group and opens the start gate; otherwise the run is killed
``inconclusive``. Nothing of the repository has run by then.
"""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path

from probe_service.sandbox.gate import StartGate, create_gate
from probe_service.sandbox.launch import Launch
from probe_service.sandbox.limits import RunCgroup
from probe_service.sandbox.process import Bounded, run_bounded
from probe_service.sandbox.runtime import find_system_tool

__all__ = [
    "CANARY_CHECKS",
    "CANARY_COMMAND",
    "CANARY_TIMEOUT_SECONDS",
    "VERDICT_CHANNEL",
    "Canaried",
    "CanaryVerdict",
    "canary_step",
    "identity_problems",
    "launch_canaried",
    "limits_problems",
    "never_started",
    "run_canary",
]

#: What ``run_canary`` alone runs behind the canary (the runner runs the probe there).
CANARY_COMMAND = "/bin/true"
CANARY_TIMEOUT_SECONDS = 30
_BUDGET = 64 * 1024
#: The verdict channel's name in the runtime's TMPDIR (made and removed per launch).
VERDICT_CHANNEL = "canary-verdict"
#: A report is a few hundred bytes; more than a pipe's buffer could block the subshell.
_REPORT_LIMIT = 64 * 1024


@dataclass(frozen=True)
class CanaryVerdict:
    """``held`` is True only if every check passed: the secret stayed hidden and the identity holds.

    Otherwise ``reason`` is ``canary_readable`` (the secret was readable, or the report is
    incomplete), ``identity_unverified`` (the probe would be host root, share a host
    namespace, or reach what it must not), ``network_filter_failed`` when the
    runtime ran without our network guard, ``limits_unverified`` when our
    bubblewrap guard did not run or a place outside scratch is writable, or
    ``sandbox_failed`` when the sandboxed shell never started (so nothing was
    proven either way) or its verdict channel was still held open.
    """

    held: bool
    reason: str | None
    detail: str
    #: The sandbox failed before its shell started, and not by spending its start-up bound:
    #: nothing ran, so one more launch is safe (docs/ARCHITECTURE.md, "Canary").
    may_retry: bool = False


#: What the canary reports on its channel, one ``key=value`` per line, the last
#: ``end=<nonce>``. ``@SECRET@``, ``@READLINK@`` and ``@END@`` are filled in quoted.
#: docs/ARCHITECTURE.md, "Containment": the identity is proven, not assumed; "Canary":
#: every check is a shell builtin or a fixed absolute path, run from ``/``, never with the
#: probe's environment, so no file of the repository can answer for it.
CANARY_CHECKS: tuple[str, ...] = (
    "cd / || exit 125",
    'if IFS= read -r secret < @SECRET@ || [ -n "$secret" ]; then printf \'%s\\n\' "$secret"; '
    "echo secret_rc=0; else echo secret_rc=1; fi",
    'while read -r inside outside count; do echo "uid_map=$inside:$outside:$count"; '
    "done < /proc/self/uid_map",
    'for ns in user ipc uts cgroup net mnt pid; do echo "ns_$ns=$(@READLINK@ /proc/self/ns/$ns)"; '
    "done",
    "if (exec 3>>/proc/sys/kernel/core_pattern) 2>/dev/null; then echo sysctl=writable; "
    "else echo sysctl=denied; fi",
    'for dir in /sys/fs/cgroup /sys/firmware; do for entry in "$dir"/* "$dir"/.[!.]* '
    '"$dir"/..?*; do if [ -e "$entry" ] || [ -h "$entry" ]; then echo "visible=$dir"; break; '
    "fi; done; done",
    "for dir in / /* /dev /dev/pts /sys/fs/cgroup /sys/firmware; do case $dir in /proc|/sys) "
    ';; *) if true 2>/dev/null > "$dir/.byte-probe-canary"; then echo "writable=$dir"; fi;; '
    "esac; done",
    'while read -r key value; do case $key in Seccomp_filters:) echo "seccomp_filters=$value";; '
    "esac; done < /proc/self/status",
    "echo end=@END@",
)
NAMESPACES = ("user", "ipc", "uts", "cgroup", "net", "mnt", "pid")


def canary_step(secret_path: Path, verdict_path: Path, readlink: Path, end: str) -> str:
    """The canary as one step of the sandboxed shell: a subshell whose only output is the
    verdict channel (errors go nowhere), closed when the subshell exits, before the marker."""
    script = "; ".join(CANARY_CHECKS)
    for token, value in (("@SECRET@", secret_path), ("@READLINK@", readlink), ("@END@", end)):
        script = script.replace(token, shlex.quote(str(value)))
    return f"( {script} ) > {shlex.quote(str(verdict_path))} 2>/dev/null"


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


@dataclass
class _Channel:
    """One launch's canary material: a fresh secret outside every allowed path and the
    verdict FIFO, whose reading end the runner holds from before the spawn."""

    secret: bytes
    secret_path: Path
    path: Path
    fd: int

    def drain(self) -> tuple[bytes, bool]:
        """Everything in the channel, without waiting; True when a writer still holds it."""
        data = bytearray()
        while len(data) <= _REPORT_LIMIT:
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:
                return bytes(data), True
            if not chunk:
                return bytes(data), False
            data += chunk
        return bytes(data), True

    def close(self) -> None:
        """Close the reading end and remove the FIFO and the secret (idempotent): a probe
        that opens the channel's path later finds nothing there."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self.path.unlink(missing_ok=True)
        shutil.rmtree(self.secret_path.parent, ignore_errors=True)


@contextmanager
def _open_channel(launch: Launch, allowed_roots: Sequence[Path]) -> Iterator[_Channel]:
    directory = _secret_dir([Path(os.path.realpath(root)) for root in allowed_roots])
    secret = secrets.token_hex(32).encode("ascii")
    target = directory / "secret"
    path = launch.runtime_tmp / VERDICT_CHANNEL
    fd = -1
    try:
        target.write_bytes(secret)
        target.chmod(0o644)
        # Owned like the runtime's TMPDIR (the slot uid's), 0600: only this run's shell
        # can open it, and only this launch's, since it is made and removed per launch.
        owner = os.stat(launch.runtime_tmp)
        os.mkfifo(path, 0o600)
        os.chown(path, owner.st_uid, owner.st_gid)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except BaseException:
        _Channel(secret, target, path, fd).close()
        raise
    channel = _Channel(secret, target, path, fd)
    try:
        yield channel
    finally:
        channel.close()


def _judge(
    report: bytes, still_open: bool, secret: bytes, launch: Launch, expected_uid: int | None
) -> CanaryVerdict:
    """The verdict of one instance's report (its channel read to the end, or not)."""
    if secret in report:
        return CanaryVerdict(False, "canary_readable", "the canary read the host secret")
    if still_open:
        detail = "the canary's verdict channel was still open when its shell went on"
        return CanaryVerdict(False, "sandbox_failed", detail)
    lines = report.decode("utf-8", "replace").splitlines()
    parsed = _report(report)
    if not lines or lines[-1] != f"end={launch.nonce}" or parsed.get("end") != [launch.nonce]:
        return CanaryVerdict(False, "canary_readable", "the canary's report is incomplete")
    if parsed.get("secret_rc") != ["1"]:
        return CanaryVerdict(False, "canary_readable", "the canary's secret reader did not fail")
    problems = identity_problems(parsed, expected_uid)
    if problems:
        return CanaryVerdict(False, "identity_unverified", "; ".join(problems))
    problems = limits_problems(parsed, launch.seccomp_filters)
    if problems:
        return CanaryVerdict(False, "limits_unverified", "; ".join(problems))
    return CanaryVerdict(True, None, "")


@dataclass
class _Verdict:
    """The start hook: judge the channel at the marker, then open the gate only if it held."""

    channel: _Channel
    launch: Launch
    expected_uid: int | None
    gate: StartGate
    verdict: CanaryVerdict | None = None
    report: bytes = b""
    seconds: float = 0.0

    def __call__(self) -> None:
        started = time.monotonic()
        try:
            self.report, still_open = self.channel.drain()
        finally:
            # Before the gate opens: nothing of the probe may find the channel or the secret.
            self.channel.close()
        self.verdict = _judge(
            self.report, still_open, self.channel.secret, self.launch, self.expected_uid
        )
        self.seconds = time.monotonic() - started
        if not self.verdict.held:
            raise OSError(f"the canary did not hold: {self.verdict.reason}")
        self.gate.release()


@dataclass(frozen=True)
class Canaried:
    """One launch of a command behind its own instance's canary."""

    outcome: Bounded
    verdict: CanaryVerdict
    #: Reading and judging the verdict at the marker (the checks run inside start-up).
    canary_seconds: float


def _verdict(outcome: Bounded, launch: Launch, hook: _Verdict) -> CanaryVerdict:
    seen = outcome.prefix + outcome.stdout + outcome.stderr + hook.report
    if hook.channel.secret in seen:
        return CanaryVerdict(False, "canary_readable", "the canary read the host secret")
    guard = launch.guard_failure(outcome.prefix)
    if guard is not None:
        return CanaryVerdict(False, *guard)
    if hook.verdict is not None:
        # Held and the gate would not open: the runner's result says sandbox_failed.
        return hook.verdict
    detail = outcome.start_detail or "the sandboxed canary never started"
    tail = outcome.stderr[-300:].decode("utf-8", "replace").strip()
    text = f"{detail}: {tail!r}" if tail else detail
    return CanaryVerdict(False, "sandbox_failed", text, never_started(outcome, launch))


def launch_canaried(
    launch: Launch,
    executable: str,
    args: Sequence[str],
    *,
    gate: StartGate,
    allowed_roots: Sequence[Path] = (),
    cgroup: RunCgroup | None = None,
    expected_uid: int | None = None,
    timeout_seconds: float,
    budget: int,
    hold: Callable[[], AbstractContextManager[object]] | None = None,
) -> Canaried:
    """Launch ``executable args`` through ``launch``, its instance's canary first; the
    command starts only if the canary held (``gate`` opens then). ``hold`` is entered
    around the spawn only, after the command was wrapped (the caller's launch lane and its
    last checks, docs/ARCHITECTURE.md, "Pipelined worker"). Raises ``OSError``
    (``LauncherUnavailable`` when the persistent launcher cannot wrap it)."""
    if launch.gate_path != gate.path:
        raise OSError("the launch's start gate is not the one the canary opens")
    with _open_channel(launch, allowed_roots) as channel:
        hook = _Verdict(channel, launch, expected_uid, gate)
        step = canary_step(channel.secret_path, channel.path, _readlink(), launch.nonce)
        argv = launch.argv(executable, args, step)
        with (hold or nullcontext)():
            outcome = run_bounded(
                argv,
                env=launch.runtime_env,
                cwd=launch.spawn_cwd,
                timeout_seconds=timeout_seconds,
                budget=budget,
                skip_stdout_prefix=len(launch.nonce),
                cgroup=cgroup,
                start_marker=launch.nonce.encode("ascii"),
                on_start=hook,
            )
    return Canaried(outcome, _verdict(outcome, launch, hook), hook.seconds)


def run_canary(
    launch: Launch,
    allowed_roots: Sequence[Path] = (),
    cgroup: RunCgroup | None = None,
    *,
    expected_uid: int | None = None,
) -> CanaryVerdict:
    """The canary alone: one instance of ``launch`` whose command is ``CANARY_COMMAND``,
    behind a gate of its own when the launch has none. Raises ``OSError`` if it cannot start.
    """
    made = launch.gate_path is None
    if launch.gate_path is None:
        owner = os.stat(launch.runtime_tmp)
        gate = create_gate(launch.runtime_tmp, cgroup, owner.st_uid, owner.st_gid)
        launch = replace(launch, gate_path=gate.path)
    else:
        gate = StartGate(launch.gate_path, cgroup)
    try:
        canaried = launch_canaried(
            launch,
            CANARY_COMMAND,
            [],
            gate=gate,
            allowed_roots=allowed_roots,
            cgroup=cgroup,
            expected_uid=expected_uid,
            timeout_seconds=CANARY_TIMEOUT_SECONDS,
            budget=_BUDGET,
        )
    finally:
        if made:
            gate.path.unlink(missing_ok=True)
    outcome, verdict = canaried.outcome, canaried.verdict
    if verdict.held and (outcome.status, outcome.exit_code) != ("ok", 0):
        detail = outcome.start_detail or f"{CANARY_COMMAND} ended {outcome.status}"
        return CanaryVerdict(False, "sandbox_failed", detail)
    return verdict
