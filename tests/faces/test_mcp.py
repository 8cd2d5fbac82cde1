"""``byte-probe mcp``: the byte_* tools from the table, tool errors, transports
(docs/ARCHITECTURE.md, "Faces"). Clients are the SDK's own (stdio and streamable HTTP)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import anyio
import pytest
from mcp.client import Client
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from probe_service.errors import InvalidInput
from probe_service.faces.mcp_server import build_server, check_bind, tool_result
from probe_service.service import ProbeService, operations

from .blocking import DEADLOCK_GUARD_S, BlockingService
from .drivers import cli_argv, free_port, mcp_http_server, open_mcp


class TestTools:
    def test_client_lists_every_mcp_operation_with_its_request_schema(self, tmp_path: Path) -> None:
        """An MCP client started as ``byte-probe mcp`` lists one byte_* tool per operation
        of the mcp face, with the request model's schema and the table's description."""
        with open_mcp(tmp_path) as client:
            listed = client.portal.call(client.session.list_tools).tools
        table = list(operations("mcp"))
        assert [t.name for t in listed] == [f"byte_{op.name}" for op in table]
        for tool, op in zip(listed, table, strict=True):
            assert tool.input_schema == op.request.model_json_schema()
            assert tool.description == op.description
        names = {t.name for t in listed}
        agent = {"byte_probe_run", "byte_probe_submit", "byte_run_status", "byte_policy_describe"}
        assert {"byte_snapshot_capture", "byte_knowledge_query", *agent} <= names
        assert not names & {"byte_policy_check", "byte_snapshot_materialize", "byte_batch_submit"}

    def test_refusal_is_a_tool_error_with_code_and_message(self, tmp_path: Path) -> None:
        """A refused call is isError with the table's code and a message naming the field."""
        with open_mcp(tmp_path) as client:
            result = client.portal.call(
                client.session.call_tool, "byte_probe_get", {"plan_id": "nope"}
            )
        assert result.is_error
        error = result.structured_content["error"]
        assert error["code"] == "invalid_input"
        assert "plan_id" in error["message"]

    def test_admin_operation_is_not_a_tool(self, tmp_path: Path) -> None:
        """byte_policy_check (it reads a path) is refused as an unknown operation."""
        with ProbeService.open(tmp_path, interface="mcp") as svc:
            result = tool_result(svc, "byte_policy_check", {"file": "/etc/shadow"})
            unprefixed = tool_result(svc, "capabilities", None)
        assert result.is_error
        assert unprefixed.is_error
        assert "unknown operation 'policy_check'" in result.structured_content["error"]["message"]
        assert unprefixed.structured_content["error"]["message"].startswith("name:")

    def test_policy_smuggled_as_an_argument_is_refused(self, tmp_path: Path) -> None:
        """byte_probe_run with a policy body besides its id is refused naming ``policy``."""
        args = {"plan_id": "a" * 64, "policy_id": "p", "policy": {"allowed_executables": ["sh"]}}
        with ProbeService.open(tmp_path, interface="mcp") as svc:
            result = tool_result(svc, "byte_probe_run", args)
        assert result.is_error
        assert result.structured_content["error"]["code"] == "invalid_input"
        assert "policy: Extra inputs" in result.structured_content["error"]["message"]


class TestConcurrency:
    def test_long_tool_runs_off_the_event_loop(self, tmp_path: Path) -> None:
        """While byte_snapshot_capture is still running, another tool call is answered."""
        BlockingService.reset()
        svc = BlockingService.open(tmp_path, interface="mcp")

        async def scenario() -> tuple[bool, bool, bool]:
            async with (
                Client(build_server(svc)) as client,
                anyio.create_task_group() as tg,
            ):
                capture: list[bool] = []

                async def run_capture() -> None:
                    result = await client.call_tool("byte_snapshot_capture", {"root": "/x"})
                    capture.append(result.is_error)

                tg.start_soon(run_capture)
                assert await anyio.to_thread.run_sync(
                    BlockingService.started.wait, DEADLOCK_GUARD_S
                )
                events = await client.call_tool("byte_knowledge_events", {})
                answered_while_blocked = not BlockingService.release.is_set()
                BlockingService.release.set()
            return answered_while_blocked, events.is_error, capture == [False]

        try:
            answered_while_blocked, events_failed, capture_ok = anyio.run(scenario)
        finally:
            BlockingService.release.set()
            svc.close()
        assert answered_while_blocked
        assert not events_failed
        assert capture_ok


class TestBind:
    def test_127_0_0_1_is_accepted(self) -> None:
        """The default address needs no flag."""
        check_bind("127.0.0.1", allow_remote=False)

    @pytest.mark.parametrize("host", ["127.0.0.2", "::1", "localhost", "192.0.2.7", "example.org"])
    def test_any_other_bind_must_be_explicit(self, host: str) -> None:
        """Any other address, loopback ones included, is refused naming --host unless
        --allow-remote is given (a name that is not an address is refused either way)."""
        with pytest.raises(InvalidInput, match="--host"):
            check_bind(host, allow_remote=False)
        if host != "example.org":
            check_bind(host, allow_remote=True)

    @pytest.mark.parametrize("host", ["0.0.0.0", "::"])  # noqa: S104
    def test_a_wildcard_bind_is_refused_even_when_remote(self, host: str) -> None:
        """Every address at once cannot be checked against a Host header: refused."""
        with pytest.raises(InvalidInput, match="every address"):
            check_bind(host, allow_remote=True)

    def test_cli_refuses_a_public_bind_before_serving(self, tmp_path: Path) -> None:
        """``byte-probe mcp --http --host 192.0.2.7`` exits 3 with one line on stderr."""
        done = subprocess.run(
            cli_argv("mcp", "--root", str(tmp_path), "--http", "--host", "192.0.2.7"),
            capture_output=True,
            timeout=DEADLOCK_GUARD_S,
            check=False,
        )
        assert done.returncode == 3
        assert b"--allow-remote" in done.stderr
        assert done.stdout == b""


def test_streamable_http_on_loopback(tmp_path: Path) -> None:
    """``--http`` serves the same tools on 127.0.0.1 to the SDK's HTTP client."""
    port = free_port()

    async def list_and_call() -> tuple[list[str], bool]:
        async with (
            streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            tools = (await session.list_tools()).tools
            caps = await session.call_tool("byte_capabilities", {})
            return [t.name for t in tools], caps.is_error

    with mcp_http_server(tmp_path, port):
        names, is_error = anyio.run(list_and_call)
    assert names == [op.mcp_tool for op in operations("mcp")]
    assert is_error is False
