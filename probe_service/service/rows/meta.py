"""The ``capabilities`` row: what this engine offers, derived from the table itself."""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from ... import ENGINE_VERSION
from ...errors import InvalidInput, KeyFileError, ProbeServiceError
from ...settings import Settings
from ..catalog import Listing, listings
from ..registry import Request, operation
from ..session import ProbeService
from .common import Frozen

__all__: list[str] = []


class CapabilitiesRequest(Request):
    detail: bool = Field(
        False,
        description="Give every operation's full description and its request and response "
        "JSON Schemas (over 100 KB); by default each operation has a one-line summary.",
    )
    operations: tuple[str, ...] = Field(
        (),
        max_length=64,
        description="Give the full description and schemas of just these operations.",
        examples=[["probe_plan", "probe_run"]],
    )


class OperationInfo(Frozen):
    name: str
    #: The description's first sentence.
    summary: str
    faces: list[str]
    mcp_tool: str | None
    long_running: bool
    #: With ``detail`` (or when the operation is named): the full description and schemas;
    #: left out of a compact entry, which keeps the answer within 16 KB.
    description: str | None = None
    request_schema: dict[str, Any] | None = None
    response_schema: dict[str, Any] | None = None

    @model_serializer(mode="wrap")
    def _compact(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for key in _DETAIL:
            if data.get(key) is None:
                data.pop(key, None)
        return data


_DETAIL = ("description", "request_schema", "response_schema")


class SandboxReadiness(Frozen):
    ready: bool
    runtime_version: str
    runtime_digest: str | None
    prerequisites: dict[str, bool]
    platform: str
    problems: list[str]


class Capabilities(Frozen):
    engine_version: str
    schema_versions: dict[str, int | str]
    interface: str
    operations: list[OperationInfo]
    sandbox: SandboxReadiness
    signing_key: str
    #: How to get what the compact answer leaves out.
    schemas: str = (
        "Call capabilities with detail: true, or operations: [names], for full descriptions "
        "and request and response JSON Schemas; an MCP tool's input schema is its request "
        "schema."
    )


def _summary(description: str) -> str:
    """The first sentence of ``description``, on one line."""
    text = " ".join(description.split())
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]


def _operation_info(op: Listing, full: bool) -> OperationInfo:
    schemas = op.schemas() if full else None
    return OperationInfo(
        name=op.name,
        summary=_summary(op.description),
        faces=sorted(op.faces),
        mcp_tool=op.mcp_tool if "mcp" in op.faces else None,
        long_running=op.long_running,
        description=op.description if full else None,
        request_schema=schemas["request"] if schemas else None,
        response_schema=schemas["response"] if schemas else None,
    )


def _readiness(sandbox_dir: Path) -> SandboxReadiness:
    from ...sandbox.runtime import PINNED_VERSION, find_system_tool, locate_runtime

    problems: list[str] = []
    digest: str | None = None
    try:
        digest = locate_runtime(sandbox_dir).digest
    except ProbeServiceError as exc:
        problems.append(str(exc))
    tools = {name: find_system_tool(name) is not None for name in ("bwrap", "socat", "rg")}
    problems += [f"{name}: not found" for name, ok in tools.items() if not ok]
    return SandboxReadiness(
        ready=not problems,
        runtime_version=PINNED_VERSION,
        runtime_digest=digest,
        prerequisites={"runtime": digest is not None, **tools},
        platform=f"{platform.system()} {platform.release()} {platform.machine()}",
        problems=problems,
    )


@operation("capabilities")
def capabilities(svc: ProbeService, req: CapabilitiesRequest) -> Capabilities:
    """Negotiate: the engine version, schema versions, every operation this interface
    offers with a one-line summary, and whether the sandbox is ready here (verified
    runtime, prerequisites, platform). With detail: true (or operations: [names]) it adds full
    descriptions and request and response JSON Schemas. Reads nothing from repositories.
    Refuses an operation name this interface does not offer."""
    from ...plans.receipts import RECEIPT_VERSION
    from ...policies.model import NEWEST_POLICY_SCHEMA
    from ...store.migrate import schema_head

    offered = listings(svc.interface)
    unknown = sorted(set(req.operations) - {op.name for op in offered})
    if unknown:
        raise InvalidInput(f"operations: {', '.join(unknown)[:300]} not offered on this face")
    named = set(req.operations)

    return Capabilities(
        engine_version=ENGINE_VERSION,
        schema_versions={
            "store": svc.cached("schema_head", schema_head),
            "receipt": RECEIPT_VERSION,
            "policy_file": NEWEST_POLICY_SCHEMA,
        },
        interface=svc.interface,
        operations=[_operation_info(op, req.detail or op.name in named) for op in offered],
        sandbox=svc.cached("readiness", lambda: _readiness(svc.settings.sandbox_dir)),
        signing_key=_signer(svc.settings),
    )


def _signer(settings: Settings) -> str:
    """The configured signing key's fingerprint, ``unsigned`` without one, or why the
    configured key is refused (docs/ARCHITECTURE.md, "Signed receipts")."""
    from ...plans.signing import UNSIGNED, configured_signing_key

    try:
        key = configured_signing_key(settings)
    except KeyFileError as exc:
        return f"refused: {exc}"
    return key.fingerprint if key else UNSIGNED
