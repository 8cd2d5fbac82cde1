"""The persistent launcher: one long-lived Node helper per network configuration.

docs/ARCHITECTURE.md, "Persistent launcher": the helper (``sandbox/launcher.mjs``, part of
the verified runtime digest) loads the Sandbox Runtime once and, per command, returns the
wrapped argv for that run's exact settings; the runner spawns it itself behind the same
identity prefix, limits and start gate as the CLI path. A helper that dies, does not answer
within ``REPLY_SECONDS`` or reports anything unexpected raises ``LauncherUnavailable``; the
runner then falls back to the CLI path (sandboxed and canaried again) and the pool starts a
fresh helper for the next run. Nothing ever runs unsandboxed because of a helper failure.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import selectors
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from probe_service.errors import SandboxUnavailable
from probe_service.policies import canonical_json
from probe_service.sandbox.launch import NET_GUARD_PORTS_ENV, NET_GUARD_PROOF_ENV, Launch
from probe_service.sandbox.namespace import SlotNamespace
from probe_service.sandbox.runtime import LAUNCHER, SandboxRuntime
from probe_service.sandbox.settings import RunPaths

__all__ = [
    "INIT_SECONDS",
    "REPLY_SECONDS",
    "LauncherHelper",
    "LauncherPool",
    "LauncherUnavailable",
    "close_default_launchers",
    "default_launchers",
    "helper_launch",
    "sweep_stale_launchers",
]

log = logging.getLogger(__name__)

#: Bound on the helper's start (Node, the runtime, its proxies and bridges).
INIT_SECONDS = 30.0
#: Bound on one answer of a running helper.
REPLY_SECONDS = 10.0
_MAX_REPLY = 4 * 1024 * 1024


class LauncherUnavailable(SandboxUnavailable):
    """The persistent launcher could not wrap a command; the runner uses the CLI path."""

    code = "launcher_unavailable"

    def __init__(self, message: str) -> None:
        super().__init__(f"persistent launcher: {message}", reason="sandbox_failed")


def network_key(settings: Mapping[str, Any]) -> str:
    """Everything of a run's settings but its filesystem part: runs share a helper only when
    this is equal (the runtime keeps one network configuration per initialised manager)."""
    return canonical_json({k: v for k, v in settings.items() if k != "filesystem"}).decode()


#: Where a root worker's helpers live: fixed (never the temp dir a caller may change),
#: on a tmpfs that a reboot clears.
LAUNCHER_BASE = Path("/run/byte-probe/launchers")


def _launcher_base() -> Path:
    """The directory holding the helpers' homes; dead workers' homes are removed."""
    if os.geteuid() != 0:
        return Path(tempfile.gettempdir())
    LAUNCHER_BASE.mkdir(mode=0o711, parents=True, exist_ok=True)
    LAUNCHER_BASE.chmod(0o711)
    sweep_stale_launchers()
    return LAUNCHER_BASE


def sweep_stale_launchers() -> int:
    """Kill what dead workers' helpers left running and remove their homes; return how many.

    A helper's socat bridges outlive a helper killed with its worker, and they keep the
    run slot's namespace the helper lived in alive (docs/ARCHITECTURE.md, "Mount
    namespaces"): a worker sweeps them before it makes its first slot namespace.
    """
    swept = 0
    if not LAUNCHER_BASE.is_dir():
        return swept
    for entry in LAUNCHER_BASE.iterdir():
        pid = entry.name.partition("-")[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            _kill_leftovers(entry)
            shutil.rmtree(entry, ignore_errors=True)
            swept += 1
    return swept


def _kill_leftovers(home: Path) -> None:
    """Kill what a dead worker's helper left running: the helper itself and the runtime's
    socat bridges, which outlive a helper killed with its worker. Only processes whose
    command line or working directory names ``home`` are touched, never a session id alone
    (a pid may have been reused since)."""
    prefix = str(home)
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue
        if prefix in cmdline or cwd == prefix or cwd.startswith(prefix + "/"):
            with contextlib.suppress(OSError):
                os.kill(int(proc.name), signal.SIGKILL)


class LauncherHelper:
    """One running ``launcher.mjs``; requests are serialized by a lock."""

    def __init__(
        self,
        runtime: SandboxRuntime,
        settings: Mapping[str, Any],
        ports: str,
        namespace: SlotNamespace | None = None,
    ) -> None:
        """Start the helper -- inside ``namespace``, the run slot's mount namespace, when
        given -- and initialise the runtime; raises ``LauncherUnavailable``."""
        self.ports = ports
        self.namespace = namespace
        self._lock = threading.Lock()
        self._buffer = b""
        # Root-owned and searchable (not listable) by the probe uids: bubblewrap, started as
        # the slot uid, binds the bridge sockets from here; umask 077 keeps those sockets
        # unconnectable by any probe uid (docs/ARCHITECTURE.md, "Persistent launcher").
        self.home = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=_launcher_base()))
        self.home.chmod(0o711)
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(self.home),
            "TMPDIR": str(self.home),
            NET_GUARD_PORTS_ENV: ports,
        }
        argv = [
            str(runtime.node_path),
            "--require",
            str(runtime.net_guard_path),
            str(runtime.install_dir / LAUNCHER),
        ]
        # The runtime reads the run's directories while it wraps (the mandatory-deny
        # search lists the working directory): it must see them as the run's sandbox will,
        # so a slot's helper lives in that slot's namespace (docs/ARCHITECTURE.md,
        # "Mount namespaces").
        enter = [] if namespace is None else namespace.enter_argv(self.home)
        try:
            self.process = subprocess.Popen(
                [*enter, *argv],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                cwd="/" if enter else self.home,
                env=env,
                start_new_session=True,
                close_fds=True,
                umask=0o077,
            )
        except OSError as exc:
            shutil.rmtree(self.home, ignore_errors=True)
            raise LauncherUnavailable(f"cannot start {argv[-1]}: {exc}") from exc
        try:
            answer = self.request({"op": "init", "settings": dict(settings)}, INIT_SECONDS)
        except LauncherUnavailable:
            self.close()
            raise
        if answer.get("guard") != ports:
            self.close()
            raise LauncherUnavailable("the network guard is not active in the helper")
        self.guard = ports

    @property
    def alive(self) -> bool:
        """True while the helper process runs (and its slot namespace is still kept)."""
        kept = self.namespace is None or not self.namespace.closed
        return kept and self.process.poll() is None

    def request(self, message: Mapping[str, Any], timeout: float | None = None) -> dict[str, Any]:
        """Send one request and return its answer within ``timeout`` (``REPLY_SECONDS``
        unless given); raises ``LauncherUnavailable``."""
        timeout = REPLY_SECONDS if timeout is None else timeout
        with self._lock:
            if not self.alive or self.process.stdin is None:
                raise LauncherUnavailable("the helper is not running")
            try:
                self.process.stdin.write(json.dumps(dict(message)).encode() + b"\n")
                self.process.stdin.flush()
            except OSError as exc:
                raise LauncherUnavailable(f"cannot write to the helper: {exc}") from exc
            line = self._read_line(time.monotonic() + timeout)
        try:
            answer = json.loads(line)
        except ValueError as exc:
            raise LauncherUnavailable("the helper answered with malformed JSON") from exc
        if not isinstance(answer, dict) or answer.get("ok") is not True:
            error = answer.get("error") if isinstance(answer, dict) else None
            raise LauncherUnavailable(f"the helper refused: {str(error)[:300]}")
        return answer

    def _read_line(self, deadline: float) -> bytes:
        stdout = self.process.stdout
        if stdout is None:  # pragma: no cover - PIPE was given
            raise LauncherUnavailable("the helper has no output pipe")
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise LauncherUnavailable("the helper did not answer in time")
                if not selector.select(remaining):
                    continue
                chunk = os.read(stdout.fileno(), 65536)
                if not chunk:
                    raise LauncherUnavailable("the helper exited")
                self._buffer += chunk
                if len(self._buffer) > _MAX_REPLY:
                    raise LauncherUnavailable("the helper's answer is too long")
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def wrap(
        self, command: str, *, cwd: Path, home: Path, tmp: Path, settings: Mapping[str, Any]
    ) -> list[str]:
        """Return the argv that runs ``command`` under ``settings``; raises
        ``LauncherUnavailable``."""
        answer = self.request(
            {
                "op": "wrap",
                "command": command,
                "cwd": str(cwd),
                "home": str(home),
                "tmp": str(tmp),
                "settings": dict(settings),
            }
        )
        argv = answer.get("argv")
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise LauncherUnavailable("the helper's argv is malformed")
        return argv

    def command_done(self) -> None:
        """Let the runtime clean up after one wrapped command; a failure is only logged."""
        if not self.alive:
            return  # a stopped helper took its runtime state with it
        try:
            self.request({"op": "done"})
        except LauncherUnavailable as exc:
            log.warning("%s", exc)

    def close(self) -> None:
        """Stop the helper (its proxies and bridges stop with it) and remove its directory."""
        with contextlib.suppress(OSError):
            if self.process.stdin is not None:
                self.process.stdin.close()
        try:
            self.process.wait(2)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        # The runtime's socat bridges are in the helper's session and outlive it when it
        # exits or is killed; the group id stays reserved while any of them lives.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        if self.process.stdout is not None:
            self.process.stdout.close()
        shutil.rmtree(self.home, ignore_errors=True)


def helper_launch(
    launch: Launch, settings: dict[str, Any], paths: RunPaths, helper: LauncherHelper
) -> tuple[Launch, list[int]]:
    """The same launch, with each command wrapped by the persistent launcher.

    Only the wrapping moves: identity prefix, environment, gate, limits and output
    handling are the CLI path's. The guard's proof comes from the helper, which checked
    it at start (docs/ARCHITECTURE.md, "Persistent launcher").
    """

    wraps = [0]  # commands wrapped, each to be reported done to the runtime

    def wrap(command: str) -> list[str]:
        wraps[0] += 1
        return helper.wrap(
            command,
            cwd=launch.cwd,
            home=paths.runtime_home,
            tmp=paths.runtime_tmp,
            settings=settings,
        )

    env = {**launch.runtime_env, NET_GUARD_PROOF_ENV: helper.guard}
    return replace(launch, wrapper=wrap, runtime_env=env), wraps


class LauncherPool:
    """The helpers of one process, keyed by runtime digest and network configuration."""

    def __init__(self, *, enabled: bool = True) -> None:
        self.enabled = enabled
        self._lock = threading.Lock()
        self._helpers: dict[tuple[str, str, str, int], LauncherHelper] = {}

    def helper_for(
        self,
        runtime: SandboxRuntime,
        settings: Mapping[str, Any],
        ports: str,
        namespace: SlotNamespace | None = None,
    ) -> LauncherHelper | None:
        """A running helper for these settings in ``namespace`` (the run slot's), started
        if needed; None means the CLI path.

        Only runs without allowed domains use a helper: the runtime's proxies run in the
        helper, as root, where a probe uid could not reach them (docs/ARCHITECTURE.md,
        "Persistent launcher"). A helper serves the runs of one slot namespace only.
        """
        network = settings.get("network", {})
        if not self.enabled or network.get("allowedDomains"):
            return None
        place = 0 if namespace is None else namespace.inode
        key = (runtime.digest, network_key(settings), ports, place)
        with self._lock:
            self._close_orphans()
            helper = self._helpers.get(key)
            if helper is not None and helper.alive:
                return helper
            if helper is not None:
                self._helpers.pop(key).close()
            try:
                helper = LauncherHelper(runtime, settings, ports, namespace)
            except LauncherUnavailable as exc:
                log.warning("%s; using the CLI path", exc)
                return None
            self._helpers[key] = helper
            return helper

    def _close_orphans(self) -> None:
        """Stop the helpers of slot namespaces the process let go (called under the lock)."""
        for key, helper in list(self._helpers.items()):
            if helper.namespace is not None and helper.namespace.closed:
                del self._helpers[key]
                helper.close()

    def discard(self, helper: LauncherHelper) -> None:
        """Stop a helper that failed; the next run starts a fresh one."""
        with self._lock:
            for key, known in list(self._helpers.items()):
                if known is helper:
                    del self._helpers[key]
        helper.close()

    def close(self) -> None:
        """Stop every helper."""
        with self._lock:
            helpers, self._helpers = list(self._helpers.values()), {}
        for helper in helpers:
            helper.close()


_default: LauncherPool | None = None
_default_lock = threading.Lock()


def default_launchers() -> LauncherPool:
    """The process's pool (one per worker process, like the limit verification).

    A process-wide object because helpers are per process by design; tests reset it.
    """
    global _default
    with _default_lock:
        if _default is None:
            _default = LauncherPool()
            atexit.register(close_default_launchers)
        return _default


def close_default_launchers() -> None:
    """Stop the process's helpers and forget the pool (at exit, and between tests)."""
    global _default
    with _default_lock:
        pool, _default = _default, None
    if pool is not None:
        pool.close()
