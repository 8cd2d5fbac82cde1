"""Network isolation: no host loopback, no domain outside the policy's list."""

from __future__ import annotations

import socket
import textwrap

import pytest

from .conftest import Runner, make_policy

pytestmark = pytest.mark.sandbox

CONNECT = textwrap.dedent(
    """
    import socket, sys
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=3)
        print("CONNECTED")
    except OSError as exc:
        print("REFUSED", exc)
    """
)

PROXY_CONNECT = textwrap.dedent(
    """
    import base64, os, socket, urllib.parse
    proxy = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
    token = base64.b64encode(f"{proxy.username}:{proxy.password}".encode())
    sock = socket.create_connection((proxy.hostname, proxy.port), timeout=5)
    sock.sendall(b"CONNECT not-allowed.example.org:443 HTTP/1.1\\r\\n"
                 b"Host: not-allowed.example.org:443\\r\\n"
                 b"Proxy-Authorization: Basic " + token + b"\\r\\n\\r\\n")
    print(sock.recv(200).split(b"\\r\\n")[0].decode())
    """
)


def test_cannot_connect_to_a_host_loopback_listener(run: Runner) -> None:
    """A listener on the host's 127.0.0.1 is unreachable from the sandbox."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        result = run("python3", ["-c", CONNECT, str(port)])
    assert result.status == "ok"
    assert result.stdout.startswith(b"REFUSED")


def test_proxy_refuses_a_domain_outside_the_list(run: Runner) -> None:
    """With a domain list, the runtime's proxy refuses any other domain."""
    policy = make_policy(allowed_domains=["example.com"])
    result = run("python3", ["-c", PROXY_CONNECT], policy=policy)
    assert result.status == "ok", result
    assert result.stdout.split()[1] == b"403", result.stdout
