"""``byte-probe mcp``: the operation table as MCP tools, on the official ``mcp`` SDK.

Every operation the table offers on the ``mcp`` face is a tool ``byte_<name>`` whose input
schema is the request model's JSON Schema and whose description is the table's. Calls go
through ``ProbeService.call`` on one session opened at start, in a worker thread (long
operations share ``MAX_LONG_RUNNING`` slots), so the event loop keeps serving. Transport:
stdio by default; streamable HTTP on 127.0.0.1 behind ``--http`` (another address only with
``--allow-remote``), every request's Host and Origin checked against the bound address
(docs/ARCHITECTURE.md, "Faces").
"""

from __future__ import annotations

import functools
import ipaddress
import json
import logging
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings

from .. import ENGINE_VERSION
from ..errors import InternalError, InvalidInput, ProbeServiceError
from ..service.catalog import Listing, listings
from .serve_client import ServiceCalls

__all__ = [
    "DEFAULT_HTTP_HOST",
    "MAX_LONG_RUNNING",
    "build_server",
    "check_bind",
    "serve_http",
    "serve_stdio",
    "tool_result",
    "tools",
    "transport_security",
]

log = logging.getLogger("probe_service.mcp")

#: Long operations (a sandboxed run, a capture) executing at once, as on the host.
MAX_LONG_RUNNING = 2
TOOL_PREFIX = "byte_"

INSTRUCTIONS = """Byte probe service: run experiments on an immutable snapshot of code in a \
sandbox, and keep what they showed as claims tied to the code they depend on. The loop:
1. byte_snapshot_capture a working tree (a path relative to the server's --root, or inside \
the capture roots it allows), or with ref a commit, tag or branch of a repository there.
2. byte_policy_list, then byte_policy_describe: what a policy allows (executables, limits, \
network, environment); byte_probe_plan a plan naming it (checked against it).
3. byte_probe_run (answers within wait_seconds, 60 by default, else with a run_id) or \
byte_probe_submit for several plans; poll byte_run_status until state is done: its result \
holds the receipt.
4. byte_claim_create with the receipt as evidence.
5. byte_gate a snapshot: it passes when every claim in scope is current and no obligation is \
open; after an edit, capture again and byte_change_analyze to see what it opened \
(byte_gate_change does both for two git refs).
byte_capabilities lists every tool in one line (detail: true for the schemas). Ids may be \
given as unique prefixes of at least 8 hex characters."""


def tools() -> list[types.Tool]:
    """One tool per operation of the ``mcp`` face, described and typed by the table."""
    return [
        types.Tool(
            name=op.mcp_tool,
            description=op.description,
            input_schema=op.schemas()["request"],
        )
        for op in listings("mcp")
    ]


def _error_result(exc: ProbeServiceError) -> types.CallToolResult:
    error = {"code": exc.code, "message": str(exc)}
    return types.CallToolResult(
        content=[types.TextContent(text=json.dumps({"error": error}, ensure_ascii=True))],
        structured_content={"error": error},
        is_error=True,
    )


def tool_result(
    svc: ServiceCalls, tool: str, arguments: dict[str, Any] | None
) -> types.CallToolResult:
    """Run one tool call: the one place a ProbeServiceError becomes an MCP tool error
    (``isError`` with the error's code and message); a bug becomes code ``internal``."""
    try:
        name = tool.removeprefix(TOOL_PREFIX) if tool.startswith(TOOL_PREFIX) else ""
        if not name:
            raise InvalidInput(f"name: unknown tool {tool[:200]!r}")
        result = svc.call(name, arguments)
    except ProbeServiceError as exc:
        return _error_result(exc)
    except Exception as exc:
        log.exception("internal error in tool %s", tool[:200])
        return _error_result(InternalError(f"internal error ({type(exc).__name__})"))
    return types.CallToolResult(
        content=[types.TextContent(text=json.dumps(result, ensure_ascii=True))],
        structured_content=result if isinstance(result, dict) else None,
    )


def build_server(svc: ServiceCalls) -> Server[Any]:
    """The low-level MCP server over ``svc`` (an ``interface="mcp"`` session, or the local
    service's client for that face)."""
    listed = tools()
    table: dict[str, Listing] = {op.mcp_tool: op for op in listings("mcp")}
    long_slots = anyio.CapacityLimiter(MAX_LONG_RUNNING)

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        op = table.get(params.name)
        run = functools.partial(tool_result, svc, params.name, params.arguments)
        limiter = long_slots if op is not None and op.long_running else None
        return await anyio.to_thread.run_sync(run, limiter=limiter)

    return Server(
        "byte-probe",
        version=ENGINE_VERSION,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def serve_stdio(svc: ServiceCalls) -> None:
    """Serve MCP on stdin/stdout until the client closes (the SDK diverts fd 1 to stderr
    while serving, so nothing but protocol messages reaches stdout)."""
    server = build_server(svc)

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(main)


#: The one address ``--http`` binds without ``--allow-remote``.
DEFAULT_HTTP_HOST = "127.0.0.1"


def check_bind(host: str, *, allow_remote: bool) -> None:
    """Refuse any bind but 127.0.0.1 unless asked for explicitly, and a wildcard address
    always (the Host header is checked against the bound address); raises InvalidInput."""
    try:
        address = ipaddress.ip_address(host) if host != "localhost" else None
    except ValueError as exc:
        raise InvalidInput(f"--host: {host!r} is not an IP address or localhost") from exc
    if address is not None and address.is_unspecified:
        raise InvalidInput(
            f"--host: {host} is every address; bind the one clients use (requests must name "
            "it in their Host header)"
        )
    if host != DEFAULT_HTTP_HOST and not allow_remote:
        raise InvalidInput(
            f"--host: {host} is not {DEFAULT_HTTP_HOST}; pass --allow-remote to serve the "
            "tools there (they have no authentication)"
        )


def transport_security(host: str, port: int) -> TransportSecuritySettings:
    """Host and Origin checks for the bound address (DNS rebinding: a page of another site
    reaching the server under its own name is refused); ``localhost`` stands for 127.0.0.1
    and ::1 (docs/ARCHITECTURE.md, "Faces")."""
    names = [host]
    if host in (DEFAULT_HTTP_HOST, "localhost", "::1"):
        names = [DEFAULT_HTTP_HOST, "localhost", "::1"]
    authorities = [f"[{n}]:{port}" if ":" in n else f"{n}:{port}" for n in names]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=authorities,
        allowed_origins=[f"http://{a}" for a in authorities],
    )


def serve_http(svc: ServiceCalls, host: str, port: int, *, allow_remote: bool = False) -> None:
    """Serve MCP over streamable HTTP at ``http://host:port/mcp``, checking every request's
    Host and Origin against the bound address; raises InvalidInput for a bind
    ``check_bind`` refuses."""
    check_bind(host, allow_remote=allow_remote)
    import uvicorn

    app = build_server(svc).streamable_http_app(
        host=host, transport_security=transport_security(host, port)
    )
    uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning")).run()
