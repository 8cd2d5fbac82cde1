"""``byte-probe mcp``: the operation table as MCP tools, on the official ``mcp`` SDK.

Every operation the table offers on the ``mcp`` face is a tool ``byte_<name>`` whose input
schema is the request model's JSON Schema and whose description is the table's. Calls go
through ``ProbeService.call`` on one session opened at start, in a worker thread (long
operations share ``MAX_LONG_RUNNING`` slots), so the event loop keeps serving. Transport:
stdio by default; streamable HTTP on 127.0.0.1 behind ``--http`` (docs/ARCHITECTURE.md,
"Faces").
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

from .. import ENGINE_VERSION
from ..errors import InvalidInput, ProbeServiceError
from ..service import Operation, ProbeService, operations

__all__ = [
    "MAX_LONG_RUNNING",
    "build_server",
    "check_bind",
    "serve_http",
    "serve_stdio",
    "tool_result",
    "tools",
]

log = logging.getLogger("probe_service.mcp")

#: Long operations (a sandboxed run, a capture) executing at once, as on the host.
MAX_LONG_RUNNING = 2
TOOL_PREFIX = "byte_"

INSTRUCTIONS = (
    "Byte probe service: capture a snapshot of a working tree, persist a plan, run it in the "
    "sandbox under an administrator policy named by id, and keep typed claims whose "
    "applicability is rechecked when the code changes. Start with byte_capabilities."
)


def tools() -> list[types.Tool]:
    """One tool per operation of the ``mcp`` face, described and typed by the table."""
    return [
        types.Tool(
            name=op.mcp_tool,
            description=op.description,
            input_schema=op.request.model_json_schema(),
        )
        for op in operations("mcp")
    ]


def _error_result(code: str, message: str) -> types.CallToolResult:
    error = {"code": code, "message": message}
    return types.CallToolResult(
        content=[types.TextContent(text=json.dumps({"error": error}, ensure_ascii=True))],
        structured_content={"error": error},
        is_error=True,
    )


def tool_result(
    svc: ProbeService, tool: str, arguments: dict[str, Any] | None
) -> types.CallToolResult:
    """Run one tool call: the one place a ProbeServiceError becomes an MCP tool error
    (``isError`` with the error's code and message); a bug becomes code ``internal``."""
    try:
        name = tool.removeprefix(TOOL_PREFIX) if tool.startswith(TOOL_PREFIX) else ""
        if not name:
            raise InvalidInput(f"name: unknown tool {tool[:200]!r}")
        result = svc.call(name, arguments)
    except ProbeServiceError as exc:
        return _error_result(exc.code, str(exc))
    except Exception as exc:
        log.exception("internal error in tool %s", tool[:200])
        return _error_result("internal", f"internal error ({type(exc).__name__})")
    return types.CallToolResult(
        content=[types.TextContent(text=json.dumps(result, ensure_ascii=True))],
        structured_content=result if isinstance(result, dict) else None,
    )


def build_server(svc: ProbeService) -> Server[Any]:
    """The low-level MCP server over ``svc`` (an ``interface="mcp"`` session)."""
    listed = tools()
    table: dict[str, Operation] = {op.mcp_tool: op for op in operations("mcp")}
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


def serve_stdio(svc: ProbeService) -> None:
    """Serve MCP on stdin/stdout until the client closes (the SDK diverts fd 1 to stderr
    while serving, so nothing but protocol messages reaches stdout)."""
    server = build_server(svc)

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(main)


def check_bind(host: str, *, allow_remote: bool) -> None:
    """Refuse a non-loopback bind unless asked for explicitly; raises InvalidInput."""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError as exc:
        raise InvalidInput(f"--host: {host!r} is not an IP address or localhost") from exc
    if not loopback and not allow_remote:
        raise InvalidInput(
            f"--host: {host} is not a loopback address; pass --allow-remote to expose the "
            "tools to the network"
        )


def serve_http(svc: ProbeService, host: str, port: int, *, allow_remote: bool = False) -> None:
    """Serve MCP over streamable HTTP at ``http://host:port/mcp``; raises InvalidInput for
    a non-loopback host without ``allow_remote``."""
    check_bind(host, allow_remote=allow_remote)
    import uvicorn

    app = build_server(svc).streamable_http_app(host=host)
    uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning")).run()
