"""F4: with allowed domains, the network is reached by address and port, not by name alone.

Every test runs a real probe (``proxy_client.py``) through the real sandbox,
as the worker runs it, against the runtime's HTTP proxy (CONNECT and
absolute-URI plain HTTP) and its SOCKS5 proxy. A refusal must leave the
target untouched: host listeners record whether anything connected, and Redis
and PostgreSQL answers (``+PONG``, an SSL reply) never reach the probe
(docs/ARCHITECTURE.md, "Network").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from probe_service.policies import Policy
from probe_service.sandbox.runtime import find_system_tool
from tests.sandbox.conftest import Runner, make_policy

from .conftest import TEST_HOST, Listener, LoopbackWebServer, NetnsHost, repo_root

pytestmark = pytest.mark.sandbox

CLIENT = (Path(__file__).parent / "proxy_client.py").read_text(encoding="utf-8")
MODES = ("connect", "http", "socks")
PING = "PING\\r\\n"
#: PostgreSQL's SSLRequest: a server answers one byte, ``S`` or ``N``.
SSL_REQUEST = "\\x00\\x00\\x00\\x08\\x04\\xd2\\x16/"
GET = "GET / HTTP/1.0\\r\\nHost: test\\r\\n\\r\\n"


def _probe(
    run: Runner, policy: Policy, mode: str, host: str, port: int, payload: str = GET
) -> dict[str, str]:
    result = run("python3", ["-c", CLIENT, mode, host, str(port), payload], policy=policy)
    assert result.status == "ok", result
    reply: dict[str, str] = json.loads(result.stdout)
    return reply


def _granted(reply: dict[str, str]) -> bool:
    status = reply["status"]
    return " 200 " in f"{status} " or status == "socks: granted"


def _localhost_policy(*ports: int, domains: tuple[str, ...] = ("localhost",)) -> Policy:
    # The port is allowed on purpose: only the address check may refuse.
    return make_policy(allowed_domains=list(domains), allowed_ports=[80, 443, *ports])


class TestLoopbackByName:
    @pytest.mark.parametrize("mode", MODES)
    def test_redis_never_answers(self, run: Runner, mode: str) -> None:
        """Allowed domain localhost, Redis's port allowed: no tunnel, no +PONG."""
        reply = _probe(run, _localhost_policy(6379), mode, "localhost", 6379, PING)
        assert not _granted(reply), reply
        assert "PONG" not in reply["reply"]

    @pytest.mark.parametrize("mode", MODES)
    def test_postgresql_never_answers(self, run: Runner, mode: str) -> None:
        """Allowed domain localhost, PostgreSQL's port allowed: no tunnel, no reply."""
        reply = _probe(run, _localhost_policy(5432), mode, "localhost", 5432, SSL_REQUEST)
        assert not _granted(reply), reply
        # Refused: nothing (CONNECT, SOCKS) or the proxy's own 502 page (plain HTTP).
        assert reply["reply"] == "" or reply["reply"].startswith("HTTP/1.1 502 ")

    @pytest.mark.parametrize("mode", MODES)
    def test_loopback_listener_is_never_reached(
        self, run: Runner, loopback_listener: Listener, mode: str
    ) -> None:
        """A host listener on 127.0.0.1 behind an allowed name sees no connection at all."""
        port = loopback_listener.port
        reply = _probe(run, _localhost_policy(port), mode, "localhost", port, PING)
        assert not _granted(reply), reply
        assert not loopback_listener.was_reached()

    @pytest.mark.parametrize("host", ["127.0.0.1", "127.1", "2130706433"])
    @pytest.mark.parametrize("mode", MODES)
    def test_allowed_loopback_literal_is_refused(
        self, run: Runner, loopback_listener: Listener, mode: str, host: str
    ) -> None:
        """An allowed domain written as 127.0.0.1, reached as that or a shorthand, is refused."""
        port = loopback_listener.port
        policy = _localhost_policy(port, domains=("127.0.0.1",))
        reply = _probe(run, policy, mode, host, port, PING)
        assert not _granted(reply), reply
        assert not loopback_listener.was_reached()

    @pytest.mark.parametrize("host", ["::1", "::ffff:127.0.0.1", "::ffff:7f00:1"])
    @pytest.mark.parametrize("mode", MODES)
    def test_ipv6_loopback_literals_are_refused(
        self,
        run: Runner,
        loopback_listener: Listener,
        loopback6_listener: Listener,
        mode: str,
        host: str,
    ) -> None:
        """IPv6 and IPv4-mapped loopback literals reach neither ::1 nor 127.0.0.1.

        (A policy cannot list an IPv6 literal, so the runtime's name filter
        refuses these first; names resolving to them are tested below.)
        """
        ports = (loopback_listener.port, loopback6_listener.port)
        for port in ports:
            reply = _probe(run, _localhost_policy(*ports), mode, host, port, PING)
            assert not _granted(reply), reply
        assert not loopback_listener.was_reached()
        assert not loopback6_listener.was_reached()


def _run_with_hosts(
    tmp_path: Path, hosts: str, policy: Policy, mode: str, host: str, port: int, payload: str
) -> dict[str, str]:
    """Run one probe with a private /etc/hosts (mount namespace); the real file is untouched."""
    unshare, mount = find_system_tool("unshare"), find_system_tool("mount")
    assert unshare is not None
    assert mount is not None
    tmp_path.mkdir(parents=True, exist_ok=True)
    hosts_file = tmp_path / "hosts"
    hosts_file.write_text(hosts, encoding="utf-8")
    hosts_file.chmod(0o644)
    (tmp_path / "run").mkdir()
    request: dict[str, Any] = {
        "root": str(tmp_path / "run"),
        "policy": policy.model_dump(mode="json"),
        "executable": "python3",
        "args": ["-c", CLIENT, mode, host, str(port), payload],
    }
    (tmp_path / "request.json").write_text(json.dumps(request), encoding="utf-8")
    script = f'{mount} --bind "$0" /etc/hosts && exec "$1" -m tests.security.hosts_runner "$2"'
    argv = [str(unshare), "--mount", "--propagation", "private", "--", "/bin/sh", "-c", script]
    argv += [str(hosts_file), sys.executable, str(tmp_path / "request.json")]
    env = {**os.environ, "PYTHONPATH": str(repo_root())}
    done = subprocess.run(argv, capture_output=True, env=env, cwd=repo_root(), check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    outcome = json.loads(done.stdout)
    assert outcome["status"] == "ok", outcome
    reply: dict[str, str] = json.loads(outcome["stdout"])
    return reply


HOSTS = "\n".join(
    [
        "127.0.0.1 localhost",
        "::1 v6-loopback.byte-probe.test",
        "::ffff:127.0.0.1 mapped-loopback.byte-probe.test",
        "0.0.0.0 unspecified.byte-probe.test",
        f"{TEST_HOST} test-host.byte-probe.test",
        "127.0.0.1 mixed.byte-probe.test",
        f"{TEST_HOST} mixed.byte-probe.test",
        "",
    ]
)


class TestLoopbackByResolvedAddress:
    @pytest.mark.parametrize(
        "name",
        [
            "v6-loopback.byte-probe.test",
            "mapped-loopback.byte-probe.test",
            "unspecified.byte-probe.test",
        ],
    )
    @pytest.mark.parametrize("mode", MODES)
    def test_name_resolving_to_loopback_is_refused(
        self,
        tmp_path: Path,
        loopback_listener: Listener,
        loopback6_listener: Listener,
        mode: str,
        name: str,
    ) -> None:
        """A name resolving to ::1, ::ffff:127.0.0.1 or 0.0.0.0 reaches no host listener."""
        ports = (loopback_listener.port, loopback6_listener.port)
        policy = _localhost_policy(*ports, domains=(name,))
        for port in ports:
            reply = _run_with_hosts(tmp_path / str(port), HOSTS, policy, mode, name, port, PING)
            assert not _granted(reply), reply
        assert not loopback_listener.was_reached()
        assert not loopback6_listener.was_reached()

    @pytest.mark.parametrize("mode", MODES)
    def test_name_resolving_to_the_test_host_works(
        self, tmp_path: Path, test_host: NetnsHost, mode: str
    ) -> None:
        """A name resolving (only) to the test host's public-range address is fetched."""
        name = "test-host.byte-probe.test"
        policy = make_policy(allowed_domains=[name])
        reply = _run_with_hosts(tmp_path, HOSTS, policy, mode, name, 80, GET)
        assert _granted(reply), reply
        assert test_host.token in reply["reply"]

    @pytest.mark.parametrize("mode", MODES)
    def test_mixed_name_connects_only_to_the_checked_address(
        self,
        tmp_path: Path,
        test_host: NetnsHost,
        loopback_web_server: LoopbackWebServer,
        mode: str,
    ) -> None:
        """A name resolving to 127.0.0.1 and the test host reaches the test host, never loopback."""
        name = "mixed.byte-probe.test"
        policy = _localhost_policy(loopback_web_server.port, domains=(name,))
        for port in (80, loopback_web_server.port):
            reply = _run_with_hosts(tmp_path / str(port), HOSTS, policy, mode, name, port, GET)
            if port == 80:
                assert _granted(reply), reply
                assert test_host.token in reply["reply"]
        assert loopback_web_server.hits == 0


class TestAllowedPath:
    @pytest.mark.parametrize("mode", MODES)
    def test_test_host_is_reachable(self, run: Runner, test_host: NetnsHost, mode: str) -> None:
        """The allowed test host (198.51.100.2, a documentation range) is fetched on port 80."""
        policy = make_policy(allowed_domains=[TEST_HOST])
        reply = _probe(run, policy, mode, TEST_HOST, 80)
        assert _granted(reply), reply
        assert test_host.token in reply["reply"]

    @pytest.mark.parametrize("mode", MODES)
    def test_same_page_on_loopback_is_refused(
        self, run: Runner, loopback_web_server: LoopbackWebServer, mode: str
    ) -> None:
        """The same page served on 127.0.0.1, via allowed localhost and an allowed port, is not."""
        port = loopback_web_server.port
        reply = _probe(run, _localhost_policy(port), mode, "localhost", port)
        assert not _granted(reply), reply
        assert loopback_web_server.hits == 0


class TestPorts:
    @pytest.mark.parametrize("mode", MODES)
    def test_port_outside_the_policy_is_refused(
        self, run: Runner, test_host: NetnsHost, mode: str
    ) -> None:
        """Port 8080 of an allowed public-range host is refused under the default ports."""
        policy = make_policy(allowed_domains=[TEST_HOST])
        assert policy.allowed_ports == (80, 443)
        reply = _probe(run, policy, mode, TEST_HOST, 8080)
        assert not _granted(reply), reply
        assert test_host.token not in reply["reply"]

    def test_port_the_policy_allows_is_reachable(self, run: Runner, test_host: NetnsHost) -> None:
        """The same port listed in allowed_ports is reached: the port was what refused it."""
        policy = make_policy(allowed_domains=[TEST_HOST], allowed_ports=[80, 8080])
        reply = _probe(run, policy, "connect", TEST_HOST, 8080)
        assert _granted(reply), reply
        assert test_host.token in reply["reply"]


NO_NETWORK = """
import os, socket
print(sorted(name for name in os.environ if "proxy" in name.lower()))
try:
    socket.create_connection(("198.51.100.2", 80), timeout=10)
    print("CONNECTED")
except OSError as exc:
    print("REFUSED", exc)
"""


def test_no_allowed_domains_means_no_network(run: Runner, test_host: NetnsHost) -> None:
    """Without allowed domains the probe gets no proxy and cannot reach the test host."""
    result = run("python3", ["-c", NO_NETWORK], policy=make_policy())
    assert result.status == "ok", result
    proxies, outcome = result.stdout.decode().splitlines()
    assert proxies == "[]"
    assert outcome.startswith("REFUSED")
