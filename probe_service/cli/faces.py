"""``byte-probe host`` and ``byte-probe mcp``: the long-lived faces for programs and agents.

Each command opens one session and hands it to its face; the faces themselves (and the
``mcp`` SDK) are imported only when the command runs, so the rest of the CLI does not pay
for them (docs/ARCHITECTURE.md, "Faces").
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from .common import RootOption

__all__ = ["host", "mcp", "serve"]


def _log_to_stderr(face: str) -> None:
    # stdout carries protocol messages only; every log line goes to stderr.
    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING, format=f"byte-probe {face}: %(message)s"
    )


def host(root: RootOption = Path(".")) -> None:
    """Serve the operation table as NDJSON on stdin/stdout until EOF.

    One request per line, {"id", "op", "params"}; one response per line, {"id", "ok": true,
    "result"} or {"id", "ok": false, "error": {"code", "message"}}, possibly out of order
    for long operations. Lines over 1 MiB are refused. Logs go to stderr.

    Example: echo '{"id":1,"op":"capabilities"}' | byte-probe host --root .
    """
    from ..faces.host import NdjsonHost, claimed_stdio
    from ..service import ProbeService

    _log_to_stderr("host")
    with claimed_stdio() as (wire_in, wire_out), ProbeService.open(root, interface="host") as svc:
        NdjsonHost(svc, wire_out).serve(wire_in)


def mcp(
    root: RootOption = Path("."),
    http: Annotated[
        bool, typer.Option("--http", help="Serve streamable HTTP at /mcp instead of stdio.")
    ] = False,
    bind: Annotated[
        str,
        typer.Option(
            "--host",
            help="With --http: the address to bind (another than 127.0.0.1 needs --allow-remote).",
        ),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="With --http: the port.")] = 8765,
    allow_remote: Annotated[
        bool,
        typer.Option("--allow-remote", help="With --http: allow a --host other than 127.0.0.1."),
    ] = False,
) -> None:
    """Serve the agent operations as MCP tools (byte_*), on stdio by default.

    Example: byte-probe mcp --root /srv/probe    (or: byte-probe mcp --http --port 8765)
    """
    from ..faces import mcp_server
    from ..faces.host import claimed_stdio
    from ..faces.serve_client import PerCallClient, ServiceCalls
    from ..service import ProbeService
    from ..settings import read_settings

    _log_to_stderr("mcp")
    if http:
        mcp_server.check_bind(bind, allow_remote=allow_remote)
    settings = read_settings()
    svc: ServiceCalls
    if settings.serve_socket is not None:
        # A thin client: every tool call runs in the local service, as this user.
        svc = PerCallClient(settings.serve_socket, "mcp")
    else:
        with claimed_stdio():  # whatever opening the store prints must not reach the wire
            svc = ProbeService.open(root, settings=settings, interface="mcp")
    with svc:
        if http:
            mcp_server.serve_http(svc, bind, port, allow_remote=allow_remote)
        else:
            mcp_server.serve_stdio(svc)


def serve(
    root: RootOption = Path("."),
    socket_path: Annotated[
        Path | None,
        typer.Option(
            "--socket",
            help="Where to listen (default: PROBE_SERVE_SOCKET, else /run/byte-probe/serve.sock).",
        ),
    ] = None,
) -> None:
    """Serve the host face's operations on a unix socket to every local user, as root.

    The NDJSON host's protocol, one connection per client; the caller is the socket's peer
    credentials, and captures read only what that user may read. The hook, the MCP server
    and the CLI use it when PROBE_SERVE_SOCKET is set. Logs go to stderr; SIGTERM stops it.

    Example: sudo byte-probe serve --root /var/lib/byte-probe
    """
    import signal

    from ..faces.serve import DEFAULT_SOCKET, LocalService, bind_socket
    from ..service import ProbeService
    from ..settings import read_settings

    _log_to_stderr("serve")
    settings = read_settings()
    # The caller's own permissions confine a capture here (docs/ARCHITECTURE.md, "Local
    # service"); the administrator may still narrow where with BYTE_PROBE_CAPTURE_ROOTS.
    settings = settings.replace(capture_roots=settings.capture_roots or ("/",))
    path = socket_path or settings.serve_socket or DEFAULT_SOCKET
    with ProbeService.open(root, settings=settings, interface="host") as svc:
        listener = bind_socket(path, settings.serve_group)
        service = LocalService(svc, listener)
        signal.signal(signal.SIGTERM, lambda signum, frame: service.stop())
        sys.stderr.write(f"byte-probe serve: listening on {path}\n")
        sys.stderr.flush()
        try:
            service.serve_forever()
        except KeyboardInterrupt:
            service.stop()
        finally:
            with contextlib.suppress(OSError):
                os.unlink(path)
