"""The MCP server over HTTP binds 127.0.0.1 unless told otherwise, and checks every
request's Host and Origin against the address it bound (docs/ARCHITECTURE.md, "Faces").

Before: ``byte-probe mcp --http --host 127.0.0.2`` started without ``--allow-remote`` (any
loopback address counted as safe), and a server on 127.0.0.2 answered a request whose Host
header named another site: the SDK enables its DNS-rebinding protection only for
127.0.0.1, localhost and ::1, so a page that rebound its own name to 127.0.0.2 could drive
the tools (capture, run) from a browser.
"""

from __future__ import annotations

import http.client
import json
import subprocess
from pathlib import Path

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.faces.drivers import START_BOUND_S, cli_argv, free_port, mcp_http_server

pytestmark = pytest.mark.slow

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "rebinding-page", "version": "1"},
    },
}
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def _post(host: str, port: int, **headers: str) -> int:
    """The status of an MCP initialize request to the server, with ``headers`` on top
    (http.client sends the given Host header instead of its own)."""
    connection = http.client.HTTPConnection(host, port, timeout=START_BOUND_S)
    try:
        connection.request("POST", "/mcp", json.dumps(INITIALIZE), {**HEADERS, **headers})
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def test_another_loopback_address_needs_allow_remote(tmp_path: Path) -> None:
    """`--host 127.0.0.2` without --allow-remote is refused at start: exit 3, one line."""
    done = subprocess.run(
        cli_argv("mcp", "--root", str(tmp_path), "--http", "--host", "127.0.0.2"),
        capture_output=True,
        timeout=START_BOUND_S,
        check=False,
    )
    assert done.returncode == 3
    assert done.stderr.count(b"\n") == 1
    assert b"--allow-remote" in done.stderr
    assert done.stdout == b""


@pytest.mark.parametrize("host", ["127.0.0.2", "127.0.0.1"])
def test_a_foreign_host_or_origin_is_refused(tmp_path: Path, host: str) -> None:
    """A request naming another site in Host (DNS rebinding) gets 421, a foreign Origin
    403, on a server bound to 127.0.0.2 (with --allow-remote) as on the default one; the
    SDK's own client, addressing the bound address, is served."""
    port = free_port(host)
    extra = ("--allow-remote",) if host != "127.0.0.1" else ()
    with mcp_http_server(tmp_path, port, *extra, host=host):
        rebound = _post(host, port, Host=f"attacker.example:{port}")
        other_port = _post(host, port, Host=f"{host}:{port + 1}")
        foreign = _post(host, port, Origin=f"http://attacker.example:{port}")
        own_origin = _post(host, port, Origin=f"http://{host}:{port}")

        async def list_tools() -> list[str]:
            async with (
                streamable_http_client(f"http://{host}:{port}/mcp") as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                return [t.name for t in (await session.list_tools()).tools]

        names = anyio.run(list_tools)
    assert (rebound, other_port, foreign, own_origin) == (421, 421, 403, 200)
    assert "byte_capabilities" in names
