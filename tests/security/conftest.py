"""Fixtures for the network tests: a test host in its own network namespace, host listeners.

The test host lives at 198.51.100.2 (TEST-NET-2, a documentation range) on a
veth pair whose host side is 198.51.100.1; nothing here ever addresses a
machine outside this one. The network guard treats documentation ranges as
public (they are not private, and nothing routes them), which is exactly what
lets the allowed path be tested locally (docs/ARCHITECTURE.md, "Network").
"""

from __future__ import annotations

import http.server
import os
import secrets
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from probe_service.policies import Policy
from probe_service.sandbox import SandboxResult, SandboxRuntime, run_sandboxed
from probe_service.sandbox.helper import LauncherPool
from probe_service.sandbox.runtime import find_system_tool

# The refusal tests' real probe under a policy to vary is the plan tests'.
from tests.plans.conftest import refusal_probe  # noqa: F401

# The attack fixtures of the host-walk, link and launch-size tests, and the queue's farm.
from tests.queue.conftest import start_farm  # noqa: F401

# The real-sandbox fixtures (a snapshot, a scratch directory, a runner) are the sandbox tests'.
from tests.sandbox.conftest import make_policy, run, scratch, slot, snapshot  # noqa: F401
from tests.security.attacks import policy_file, run_probe, run_tmp, small_snapshot  # noqa: F401

HOST_SIDE = "198.51.100.1"
TEST_HOST = "198.51.100.2"
#: Ports the test host serves HTTP on: 80 (a default port) and 8080 (not a default).
TEST_HOST_PORTS = (80, 8080)


@dataclass(frozen=True)
class NetnsHost:
    """An HTTP server reachable from the host (not from the sandbox) at ``address``."""

    address: str
    token: str
    #: The network namespace the test host lives in (for another server of a test's own).
    namespace: str


def _tool(name: str) -> str:
    found = find_system_tool(name)
    if found is None:
        pytest.fail(f"{name} is needed (scripts/setup-system.sh installs it)")
    return str(found)


def _wait_until_serving(address: str, port: int, server: subprocess.Popen[bytes]) -> None:
    # Readiness, not a timing assertion: poll until the server accepts or exits. The
    # bound only turns a broken network set-up into a failure instead of a hang.
    for _ in range(6000):
        if server.poll() is not None:
            pytest.fail(f"test host server on port {port} exited with {server.returncode}")
        try:
            with socket.create_connection((address, port), timeout=5):
                return
        except OSError:
            time.sleep(0.05)
    pytest.fail(f"test host {address}:{port} never accepted a connection")


def _remove_stale_test_hosts(ip: str) -> None:
    """Delete test-host namespaces and links of test sessions that are gone.

    A session killed before its finalizer leaves ``bpn<pid>-ns`` and its veth holding
    the same addresses; routes would then go to the dead host.
    """
    listed = subprocess.run([ip, "netns", "list"], capture_output=True, text=True, check=False)
    for line in listed.stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        pid = name[3:].removesuffix("-ns")
        ours = name.startswith("bpn") and name.endswith("-ns") and pid.isdigit()
        if ours and not Path(f"/proc/{pid}").exists():
            subprocess.run([ip, "link", "del", f"bpn{pid}h"], check=False, capture_output=True)
            subprocess.run([ip, "netns", "del", name], check=False, capture_output=True)


@pytest.fixture(scope="session")
def test_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NetnsHost]:
    """HTTP servers on 198.51.100.2:80 and :8080 in a network namespace; always removed."""
    ip = _tool("ip")
    _remove_stale_test_hosts(ip)
    tag = f"bpn{os.getpid()}"
    namespace, host_link, ns_link = f"{tag}-ns", f"{tag}h", f"{tag}n"
    root = tmp_path_factory.mktemp("test-host")
    token = secrets.token_hex(16)
    (root / "index.html").write_text(token)
    servers: list[subprocess.Popen[bytes]] = []
    commands = [
        [ip, "netns", "add", namespace],
        [ip, "link", "add", host_link, "type", "veth", "peer", "name", ns_link],
        [ip, "link", "set", ns_link, "netns", namespace],
        [ip, "addr", "add", f"{HOST_SIDE}/24", "dev", host_link],
        [ip, "link", "set", host_link, "up"],
        [ip, "-n", namespace, "addr", "add", f"{TEST_HOST}/24", "dev", ns_link],
        [ip, "-n", namespace, "link", "set", ns_link, "up"],
        [ip, "-n", namespace, "link", "set", "lo", "up"],
    ]
    try:
        for command in commands:
            subprocess.run(command, check=True, capture_output=True)
        for port in TEST_HOST_PORTS:
            serve = ["python3", "-m", "http.server", str(port), "--bind", TEST_HOST]
            servers.append(
                subprocess.Popen(
                    [ip, "netns", "exec", namespace, *serve, "--directory", str(root)],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
            _wait_until_serving(TEST_HOST, port, servers[-1])
        yield NetnsHost(TEST_HOST, token, namespace)
    finally:
        for server in servers:
            server.terminate()
            server.wait()
        subprocess.run([ip, "link", "del", host_link], check=False, capture_output=True)
        subprocess.run([ip, "netns", "del", namespace], check=False, capture_output=True)


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.server.hits += 1  # type: ignore[attr-defined]
        body = self.server.token.encode()  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        return


class Listener:
    """A host listener that records whether anything connected to it."""

    def __init__(self, address: str) -> None:
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        self.socket = socket.create_server((address, 0), family=family)
        self.port: int = self.socket.getsockname()[1]

    def was_reached(self) -> bool:
        """True if a connection was made (completed handshakes wait in the accept queue)."""
        self.socket.setblocking(False)
        try:
            connection, _ = self.socket.accept()
        except BlockingIOError:
            return False
        connection.close()
        return True

    def close(self) -> None:
        self.socket.close()


@pytest.fixture
def loopback_listener() -> Iterator[Listener]:
    """A listener on the host's 127.0.0.1, on an ephemeral port."""
    listener = Listener("127.0.0.1")
    yield listener
    listener.close()


@pytest.fixture
def loopback6_listener() -> Iterator[Listener]:
    """A listener on the host's ::1, on an ephemeral port."""
    listener = Listener("::1")
    yield listener
    listener.close()


@dataclass
class LoopbackWebServer:
    """The test host's page, also served on the host's 127.0.0.1."""

    port: int
    server: http.server.ThreadingHTTPServer

    @property
    def hits(self) -> int:
        """How many requests reached this server."""
        return int(self.server.hits)  # type: ignore[attr-defined]


@pytest.fixture
def loopback_web_server(test_host: NetnsHost) -> Iterator[LoopbackWebServer]:
    """The test host's page served on 127.0.0.1 too, counting requests."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.hits = 0  # type: ignore[attr-defined]
    server.token = test_host.token  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield LoopbackWebServer(server.server_address[1], server)
    server.shutdown()
    server.server_close()
    thread.join()


def repo_root() -> Path:
    """The repository (worktree) root."""
    return Path(__file__).resolve().parents[2]


@pytest.fixture
def attack(runtime: SandboxRuntime, tmp_path: Path) -> Any:
    """Run one attack script as a probe (``sh -c`` or ``python3 -c``), fresh dirs each call."""
    counter = iter(range(1000))

    def _attack(
        language: str, script: str, *extra: str, policy: Policy | None = None, **kw: Any
    ) -> SandboxResult:
        base = tmp_path / f"run{next(counter)}"
        (base / "snapshot").mkdir(parents=True)
        (base / "scratch").mkdir()
        return run_sandboxed(
            environment=os.environ,
            policy=policy or make_policy(timeout_seconds=60),
            executable=language,
            args=["-c", script, *extra],
            snapshot_dir=base / "snapshot",
            scratch_dir=base / "scratch",
            runtime=runtime,
            **kw,
        )

    return _attack


@pytest.fixture(params=["helper", "cli"])
def attack_both(request: pytest.FixtureRequest, attack: Any) -> Iterator[Any]:
    """``attack`` through the persistent launcher and through the CLI fallback path."""
    mode = request.param
    pool = LauncherPool(enabled=mode == "helper")

    def _attack(*args: Any, **kw: Any) -> SandboxResult:
        result: SandboxResult = attack(*args, launchers=pool, **kw)
        assert result.launcher == mode, result.detail
        return result

    yield _attack
    pool.close()
