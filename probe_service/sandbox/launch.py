"""Build the exact srt invocation for one run: argv, environment and command string.

srt 0.0.55 runs every command through ``bash -c`` inside bwrap (its argv mode
only joins arguments with shell-quote). We therefore build the one command
string ourselves with ``shlex.quote`` on every word, and pass it with ``-c`` --
so our quoting is the only quoting of probe arguments, and a hypothesis test
round-trips hostile bytes through every layer.

srt's Node process is started with our network guard preloaded
(``node --require net-guard.cjs``), configured with the policy's ports; the
sandboxed shell prints the start marker only when the guard reports itself
active with exactly those ports (docs/ARCHITECTURE.md, "Network"), and only when
our bubblewrap guard (``sandbox/bwrap-guard.sh``, the runtime's ``bwrapPath``)
reports that it loaded this run's seccomp filter and made every place outside
scratch read-only (docs/ARCHITECTURE.md, "Limits").
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "BWRAP_GUARD_PROOF_ENV",
    "NET_GUARD_PORTS_ENV",
    "NET_GUARD_PROOF_ENV",
    "PROXY_ENV_NAMES",
    "SECCOMP_FILTER_ENV",
    "SHM_DIR_ENV",
    "Launch",
    "build_command",
    "build_launch",
]

#: Names 0.0.55 sets inside the sandbox to reach its filtering proxy
#: (``generateProxyEnvVars``); passed through only when the policy allows domains.
PROXY_ENV_NAMES: tuple[str, ...] = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "http_proxy",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
)
_ENV = "/usr/bin/env"
#: The ports the network guard allows, set in srt's environment (read by net-guard.cjs).
NET_GUARD_PORTS_ENV = "BYTE_PROBE_NET_PORTS"
#: Set by the guard once installed; srt's sandboxed shell inherits it.
NET_GUARD_PROOF_ENV = "BYTE_PROBE_NET_GUARD"
#: Printed instead of the start marker when the guard is not active.
_UNGUARDED = "network-filter-inactive"
#: Read by sandbox/bwrap-guard.sh: the run's seccomp filter, and the directory (scratch)
#: it mounts at /dev/shm.
SECCOMP_FILTER_ENV = "BYTE_PROBE_SECCOMP_FILTER"
SHM_DIR_ENV = "BYTE_PROBE_SHM_DIR"
#: Set inside the sandbox by sandbox/bwrap-guard.sh (to the filter it loaded).
BWRAP_GUARD_PROOF_ENV = "BYTE_PROBE_BWRAP_GUARD"
#: Printed instead of the start marker when the bubblewrap guard did not run.
_UNLIMITED = "bwrap-guard-inactive"


@dataclass(frozen=True)
class Launch:
    """Everything needed to start srt the same way for every launch of a run (each
    preflight command and the probe, each with its canary inside)."""

    settings_path: Path
    node_path: Path
    net_guard_path: Path
    cli_path: Path
    cwd: Path
    runtime_env: Mapping[str, str]
    prefix_argv: tuple[str, ...]
    probe_env: Mapping[str, str]
    pass_proxy_env: bool
    nonce: str
    #: Host-side prefix before Node: new ipc/uts/cgroup namespaces, then the slot uid.
    host_prefix: tuple[str, ...] = ()
    #: FIFO the in-sandbox shell waits on until the runner moved it into the probe group.
    gate_path: Path | None = None
    #: Wraps one command through the persistent launcher; None means the srt CLI
    #: (docs/ARCHITECTURE.md, "Persistent launcher"). Raises ``OSError`` when it cannot.
    wrapper: Callable[[str], list[str]] | None = None
    #: The argv that enters the run slot's mount namespace with a working directory
    #: (docs/ARCHITECTURE.md, "Mount namespaces"); it comes first, before the host prefix.
    enter_namespace: Callable[[Path], list[str]] | None = None

    @property
    def spawn_cwd(self) -> Path:
        """Where the host spawns ``argv``: ``/`` when it enters the slot's namespace (which
        sets ``cwd`` itself, as the namespace sees it), else ``cwd``."""
        return Path("/") if self.enter_namespace is not None else self.cwd

    @property
    def runtime_tmp(self) -> Path:
        """The runtime's TMPDIR (the run's ``tmp``): readable inside the sandbox at the same
        path, where the start gate and the canary's verdict channel live."""
        return Path(self.runtime_env["TMPDIR"])

    @property
    def mode(self) -> str:
        """``helper`` (the persistent launcher) or ``cli`` (one srt process per command)."""
        return "cli" if self.wrapper is None else "helper"

    #: How many seccomp filters the sandboxed command runs under (the canary checks it).
    seccomp_filters: int | None = None

    @property
    def unguarded_marker(self) -> str:
        """What the shell prints instead of ``nonce`` when the network guard is not active."""
        return _UNGUARDED.ljust(len(self.nonce), "-")[: len(self.nonce)]

    @property
    def unlimited_marker(self) -> str:
        """What the shell prints instead of ``nonce`` when the bubblewrap guard did not run."""
        return _UNLIMITED.ljust(len(self.nonce), "-")[: len(self.nonce)]

    def guard_failure(self, prefix: bytes) -> tuple[str, str] | None:
        """The reason and detail when ``prefix`` is a guard's marker instead of the nonce."""
        if prefix == self.unguarded_marker.encode("ascii"):
            return "network_filter_failed", "the network guard was not active in the runtime"
        if prefix == self.unlimited_marker.encode("ascii"):
            detail = "the bubblewrap guard (seccomp filter, read-only mounts) did not run"
            return "limits_unverified", detail
        return None

    def argv(self, executable: str, args: Sequence[str], canary: str | None = None) -> list[str]:
        """Return the host argv that runs ``executable args`` under these exact settings,
        after the in-instance ``canary`` step when given (``canary.canary_step``)."""
        command = build_command(self, executable, args, canary)
        enter = [] if self.enter_namespace is None else self.enter_namespace(self.cwd)
        if self.wrapper is not None:
            return [*enter, *self.host_prefix, *self.wrapper(command)]
        return [
            *enter,
            *self.host_prefix,
            str(self.node_path),
            "--require",
            str(self.net_guard_path),
            str(self.cli_path),
            "-s",
            str(self.settings_path),
            "-c",
            command,
        ]


def build_command(
    launch: Launch, executable: str, args: Sequence[str], canary: str | None = None
) -> str:
    """Return the shell command srt runs: guard check, the canary step (when given), start
    marker, gate, exec of prlimit/env/probe.

    docs/ARCHITECTURE.md, "Canary": the canary step runs in this very shell's instance
    before the start marker and writes its report on its own channel, which it has closed
    before the marker; the runner judges that report when the marker arrives and opens
    the gate only if it held.
    """
    words = [*launch.prefix_argv, _ENV, "-i", "--"]
    words += [f"{name}={value}" for name, value in sorted(launch.probe_env.items())]
    quoted = [shlex.quote(word) for word in words]
    if launch.pass_proxy_env:
        # Values exist only inside the sandbox (they carry the proxy's auth token).
        quoted += [f'"{name}=${{{name}}}"' for name in PROXY_ENV_NAMES]
    quoted += [shlex.quote(executable), *(shlex.quote(arg) for arg in args)]
    ports = shlex.quote(launch.runtime_env[NET_GUARD_PORTS_ENV])
    guard = (
        f'[ "${{{NET_GUARD_PROOF_ENV}-}}" = {ports} ] '
        f"|| {{ printf %s {launch.unguarded_marker}; exit 125; }}"
    )
    loaded = shlex.quote(launch.runtime_env[SECCOMP_FILTER_ENV])
    guard += (
        f'; [ "${{{BWRAP_GUARD_PROOF_ENV}-}}" = {loaded} ] '
        f"|| {{ printf %s {launch.unlimited_marker}; exit 125; }}"
    )
    # The marker proves the sandboxed shell started; bash's printf is a builtin.
    start = f"printf %s {launch.nonce}"
    if launch.gate_path is not None:
        # The shell opens the gate before the marker, so once the runner sees the
        # marker it can find the shell by that descriptor, move it into the probe
        # cgroup and only then let it exec the probe (docs/ARCHITECTURE.md, Limits).
        gate = shlex.quote(str(launch.gate_path))
        start = f"exec 3<>{gate} && {start} && read -r _ <&3 && exec 3<&-"
    step = "" if canary is None else f"{canary}; "
    return f"{guard}; {step}{start} && exec {' '.join(quoted)}"


def build_launch(
    *,
    settings_path: Path,
    node_path: Path,
    net_guard_path: Path,
    cli_path: Path,
    cwd: Path,
    runtime_home: Path,
    runtime_tmp: Path,
    prefix_argv: Sequence[str],
    probe_env: Mapping[str, str],
    pass_proxy_env: bool,
    allowed_ports: Sequence[int],
    nonce: str,
    marker: str,
    seccomp_filter: Path,
    shm_dir: Path,
    host_prefix: Sequence[str] = (),
    gate_path: Path | None = None,
    seccomp_filters: int | None = None,
    enter_namespace: Callable[[Path], list[str]] | None = None,
) -> Launch:
    """Assemble a ``Launch``; the runtime's own environment is fixed, never inherited.

    ``seccomp_filter`` and ``shm_dir`` are what the bubblewrap guard loads and mounts at
    /dev/shm; the sandboxed shell starts the command only behind the guard's proof.
    ``seccomp_filters`` is the number of filters the command must find itself under.
    """
    runtime_env = {
        # srt resolves bash through PATH; a fixed system PATH keeps that honest.
        "PATH": "/usr/bin:/bin",
        "HOME": str(runtime_home),
        "TMPDIR": str(runtime_tmp),
        "BYTE_PROBE_RUN_MARKER": marker,
        NET_GUARD_PORTS_ENV: ",".join(str(port) for port in allowed_ports),
        SECCOMP_FILTER_ENV: str(seccomp_filter),
        SHM_DIR_ENV: str(shm_dir),
    }
    return Launch(
        settings_path=settings_path,
        node_path=node_path,
        net_guard_path=net_guard_path,
        cli_path=cli_path,
        cwd=cwd,
        runtime_env=runtime_env,
        prefix_argv=tuple(prefix_argv),
        probe_env=dict(probe_env),
        pass_proxy_env=pass_proxy_env,
        nonce=nonce,
        host_prefix=tuple(host_prefix),
        gate_path=gate_path,
        seccomp_filters=seccomp_filters,
        enter_namespace=enter_namespace,
    )
