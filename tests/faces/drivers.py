"""One way to call the operation table per face, each answering plain JSON.

``call(op, params)`` returns the operation's JSON result, or ``{"error": {"code",
"message"}}`` when the face refused it, so a scenario can run unchanged on every face:
the Python API in process, ``byte-probe host`` as a subprocess, and ``byte-probe mcp``
through the SDK's own stdio client.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Protocol

from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from probe_service.errors import ProbeServiceError
from probe_service.service import ProbeService

FACES = ("python", "host", "mcp")


class Driver(Protocol):
    def call(self, op: str, params: dict[str, Any] | None = None) -> Any: ...


def cli_argv(*args: str) -> list[str]:
    """``byte-probe ARGS`` as this interpreter runs it (the worktree's code)."""
    return [sys.executable, "-m", "probe_service.cli", *args]


class PythonDriver:
    """The Python API: ``svc.<op>(**params)``, its response dumped as JSON."""

    def __init__(self, svc: ProbeService) -> None:
        self.svc = svc

    def call(self, op: str, params: dict[str, Any] | None = None) -> Any:
        try:
            result = getattr(self.svc, op)(**(params or {}))
        except ProbeServiceError as exc:
            return {"error": {"code": exc.code, "message": str(exc)}}
        return self.svc.operation(op).dump(result)


class HostDriver:
    """``byte-probe host`` as a subprocess: one request line out, its response line back."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.next_id = 0

    @property
    def stdin(self) -> IO[bytes]:
        assert self.process.stdin is not None
        return self.process.stdin

    def send_line(self, line: bytes) -> dict[str, Any]:
        """Write one raw line and read one response line."""
        assert self.process.stdout is not None
        self.stdin.write(line + b"\n")
        self.stdin.flush()
        response = self.process.stdout.readline()
        assert response, "the host closed stdout"
        frame: dict[str, Any] = json.loads(response)
        return frame

    def request(self, op: str, params: object = None) -> dict[str, Any]:
        self.next_id += 1
        frame = self.send_line(
            json.dumps({"id": self.next_id, "op": op, "params": params}).encode()
        )
        assert frame["id"] == self.next_id
        return frame

    def call(self, op: str, params: dict[str, Any] | None = None) -> Any:
        frame = self.request(op, params or {})
        return frame["result"] if frame["ok"] else {"error": frame["error"]}


class McpDriver:
    """``byte-probe mcp`` through the SDK's stdio client, driven from a blocking portal."""

    def __init__(self, portal: BlockingPortal, session: ClientSession, instructions: str) -> None:
        self.portal = portal
        self.session = session
        #: What the server told the client at initialization.
        self.instructions = instructions

    def call(self, op: str, params: dict[str, Any] | None = None) -> Any:
        result = self.portal.call(self.session.call_tool, f"byte_{op}", params or {})
        doc = json.loads(result.content[0].text)
        if result.is_error:
            assert set(doc) == {"error"}
        return doc


@contextlib.contextmanager
def open_host(root: Path) -> Iterator[HostDriver]:
    """A running ``byte-probe host --root ROOT``; closed (EOF) and reaped on exit."""
    process = subprocess.Popen(
        cli_argv("host", "--root", str(root)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        yield HostDriver(process)
    finally:
        out, err = process.communicate(timeout=120)
        assert out == b"", f"stdout after EOF: {out[:200]!r}"
        assert process.returncode == 0, err.decode(errors="replace")


@contextlib.contextmanager
def open_mcp(root: Path, env: dict[str, str] | None = None) -> Iterator[McpDriver]:
    """A ``byte-probe mcp --root ROOT`` session through ``mcp.client.stdio`` (with ``env``,
    else this process's environment)."""
    params = StdioServerParameters(
        command=sys.executable,
        args=cli_argv("mcp", "--root", str(root))[1:],
        env=dict(os.environ) if env is None else env,
    )
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(stdio_client(params)) as (read, write),
        portal.wrap_async_context_manager(ClientSession(read, write)) as session,
    ):
        initialized = portal.call(session.initialize)
        yield McpDriver(portal, session, initialized.instructions or "")


@contextlib.contextmanager
def open_face(face: str, root: Path) -> Iterator[Driver]:
    """A driver of ``face`` over the store under ``root``."""
    if face == "python":
        with ProbeService.open(root) as svc:
            yield PythonDriver(svc)
    elif face == "host":
        with open_host(root) as host:
            yield host
    else:
        with open_mcp(root) as client:
            yield client


#: Bound on waiting for a served face to accept connections (not a timing assertion).
START_BOUND_S = 120


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on at ``host`` now."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def mcp_http_server(root: Path, port: int, *extra: str, host: str = "127.0.0.1") -> Iterator[None]:
    """``byte-probe mcp --http --host HOST --port PORT EXTRA…``, once it accepts connections;
    terminated on exit."""
    process = subprocess.Popen(
        cli_argv("mcp", "--root", str(root), "--http", "--host", host, "--port", str(port), *extra),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=dict(os.environ),
    )
    try:
        deadline = time.monotonic() + START_BOUND_S
        while time.monotonic() < deadline:
            assert process.poll() is None, process.communicate()[1]
            with contextlib.suppress(OSError), socket.create_connection((host, port)):
                break
            time.sleep(0.1)
        yield
    finally:
        process.terminate()
        process.communicate(timeout=START_BOUND_S)
