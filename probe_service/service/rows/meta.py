"""The ``capabilities`` row: what this engine offers, derived from the table itself."""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

from ... import ENGINE_VERSION
from ...errors import KeyFileError, ProbeServiceError
from ...settings import Settings
from ..registry import Request, operation, operations
from ..session import ProbeService
from .common import Frozen

__all__: list[str] = []


class CapabilitiesRequest(Request):
    """No parameters."""


class OperationInfo(Frozen):
    name: str
    description: str
    faces: list[str]
    mcp_tool: str | None
    long_running: bool
    request_schema: dict[str, Any]
    response_schema: dict[str, Any]


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
    offers with its request and response JSON Schemas, and whether the sandbox is ready
    here (verified runtime, prerequisites, platform). Reads nothing from repositories."""
    from ...plans.receipts import RECEIPT_VERSION
    from ...policies.model import NEWEST_POLICY_SCHEMA
    from ...store.migrate import schema_head

    return Capabilities(
        engine_version=ENGINE_VERSION,
        schema_versions={
            "store": svc.cached("schema_head", schema_head),
            "receipt": RECEIPT_VERSION,
            "policy_file": NEWEST_POLICY_SCHEMA,
        },
        interface=svc.interface,
        operations=[
            OperationInfo(
                name=op.name,
                description=op.description,
                faces=sorted(op.faces),
                mcp_tool=op.mcp_tool if "mcp" in op.faces else None,
                long_running=op.long_running,
                request_schema=op.schemas()["request"],
                response_schema=op.schemas()["response"],
            )
            for op in operations(svc.interface)
        ],
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
