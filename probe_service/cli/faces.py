"""``byte-probe host`` and ``byte-probe mcp``: the long-lived faces for programs and agents.

Each command opens one session and hands it to its face; the faces themselves (and the
``mcp`` SDK) are imported only when the command runs, so the rest of the CLI does not pay
for them (docs/ARCHITECTURE.md, "Faces").
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated

import typer

from .common import RootOption

__all__ = ["host", "mcp"]


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
    from ..service import ProbeService

    _log_to_stderr("mcp")
    if http:
        mcp_server.check_bind(bind, allow_remote=allow_remote)
    with claimed_stdio():  # whatever opening the store prints must not reach the wire
        svc = ProbeService.open(root, interface="mcp")
    with svc:
        if http:
            mcp_server.serve_http(svc, bind, port, allow_remote=allow_remote)
        else:
            mcp_server.serve_stdio(svc)
