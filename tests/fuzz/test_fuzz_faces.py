"""The long-lived faces' decoders: every input decodes or yields the one documented error
form, never a crash (code ``internal``), and a refused request writes nothing.

The NDJSON host's request decoder gets arbitrary bytes, JSON and near-valid requests; a
whole host (a real session over a real store) answers fuzzed lines of every short
operation; the MCP server's tool call gets fuzzed tool names and arguments. Long
operations are left out of the live fuzzers: a fuzzed ``root`` would capture an arbitrary
directory of this machine. See docs/ARCHITECTURE.md, "Faces".
"""

from __future__ import annotations

import inspect
import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from probe_service import errors
from probe_service.faces.frames import HostRequest, Refused, decode_request
from probe_service.faces.host import NdjsonHost
from probe_service.faces.mcp_server import tool_result
from probe_service.service import ProbeService, operations

from .strategies import fed, json_texts, json_values, mutated, row_counts

pytestmark = pytest.mark.fuzz

FUZZ = settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
STORE_FUZZ = settings(
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

#: Every code a refusal may carry: the error tree's, never ``internal``.
CODES = {
    cls.code
    for _, cls in inspect.getmembers(errors, inspect.isclass)
    if issubclass(cls, errors.ProbeServiceError)
}
SHORT_HOST_OPS = [op.name for op in operations("host") if not op.long_running]
SHORT_MCP_TOOLS = [op.mcp_tool for op in operations("mcp") if not op.long_running]
H = "a" * 64

#: Near-valid params to mutate: one well-formed request per kind of field.
VALID_PARAMS: dict[str, Any] = {
    "probe_get": {"plan_id": H},
    "knowledge_query": {"scope": "s", "target_snapshot": H, "text": "x", "paths": ["a"]},
    "obligation_resolve": {
        "obligation_id": "obl_" + "a" * 32,
        "resolution": "rechecked",
        "rationale": "r",
        "receipt": H,
    },
    "gate": {"snapshot_id": H, "require_signed": [H]},
    "claim_create": {
        "claim": {
            "scope": "s",
            "statement": "x",
            "kind": "behavior",
            "snapshot_id": H,
            "dependencies": [{"exact_blob": {"path": "a.py"}}],
        }
    },
}


def _request(op: str, params: Any) -> dict[str, Any]:
    return {"id": 7, "op": op, "params": params}


requests = st.builds(
    _request,
    st.sampled_from(SHORT_HOST_OPS) | st.text(max_size=12),
    json_values | st.sampled_from(list(VALID_PARAMS)).flatmap(lambda n: mutated(VALID_PARAMS[n])),
)
lines = (
    st.binary(max_size=120)
    | json_texts.map(lambda t: t.encode("utf-8", "surrogatepass"))
    | requests.map(lambda r: json.dumps(r).encode())
    | mutated({"id": 1, "op": "capabilities", "params": {}}).map(lambda r: json.dumps(r).encode())
)


class TestRequestDecoder:
    @FUZZ
    @given(lines)
    @example(b"[" * 5000)
    @example(b'{"id": 1' + b"0" * 5000 + b', "op": "x"}')
    @example(b'{"id": "\\ud800", "op": "\\udfff"}')
    def test_decodes_or_refuses_with_invalid_input(self, line: bytes) -> None:
        """decode_request returns a request or one InvalidInput refusal; it never raises."""
        decoded = decode_request(fed(line))
        if isinstance(decoded, Refused):
            assert isinstance(decoded.error, errors.InvalidInput)
            assert decoded.error.code in {"invalid_input", "limit_exceeded"}
        else:
            assert isinstance(decoded, HostRequest)
            assert isinstance(decoded.op, str)
            assert decoded.op
        assert decoded.id is None or isinstance(decoded.id, str | int)


@pytest.fixture(scope="module")
def host_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProbeService]:
    svc = ProbeService.open(tmp_path_factory.mktemp("fuzz-host"), interface="host")
    yield svc
    svc.close()


@pytest.fixture(scope="module")
def mcp_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProbeService]:
    svc = ProbeService.open(tmp_path_factory.mktemp("fuzz-mcp"), interface="mcp")
    yield svc
    svc.close()


class TestHost:
    @STORE_FUZZ
    @given(line=lines)
    def test_every_line_gets_one_frame_and_refusals_write_nothing(
        self, host_service: ProbeService, line: bytes
    ) -> None:
        """One response line per request line: a result or an error of the tree's codes;
        a refused request leaves every table as it was."""
        out = io.BytesIO()
        before = row_counts(host_service.store)
        NdjsonHost(host_service, out).serve(io.BytesIO(fed(line).replace(b"\n", b" ") + b"\n"))
        (response,) = out.getvalue().splitlines()
        frame = json.loads(response)
        assert set(frame) in ({"id", "ok", "result"}, {"id", "ok", "error"})
        if not frame["ok"]:
            assert frame["error"]["code"] in CODES, frame
            assert row_counts(host_service.store) == before


class TestMcpTools:
    @STORE_FUZZ
    @given(
        tool=st.sampled_from(SHORT_MCP_TOOLS) | st.text(max_size=12),
        arguments=st.none()
        | st.dictionaries(st.text(max_size=10), json_values, max_size=4)
        | st.sampled_from(list(VALID_PARAMS)).flatmap(lambda n: mutated(VALID_PARAMS[n])),
    )
    def test_tool_calls_answer_or_are_tool_errors_writing_nothing(
        self, mcp_service: ProbeService, tool: str, arguments: Any
    ) -> None:
        """A tool call returns content or isError with a code of the tree; never a crash;
        a refused call leaves every table as it was."""
        before = row_counts(mcp_service.store)
        args = arguments if isinstance(arguments, dict) or arguments is None else {"x": arguments}
        result = tool_result(mcp_service, tool, fed(args))
        doc = json.loads(result.content[0].text)
        if result.is_error:
            assert doc["error"]["code"] in CODES, doc
            assert row_counts(mcp_service.store) == before
