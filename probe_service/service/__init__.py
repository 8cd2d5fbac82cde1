"""The service layer: one operation table behind every face (docs/ARCHITECTURE.md,
"The operation table").

``ProbeService.open(root=".")`` opens a session; every operation is a typed method of it
(``svc.probe_run(plan_id=…, policy_id=…)``) and ``svc.call(name, params)`` is the JSON form
the NDJSON host, the MCP server and the web view use. The rows (``service/rows/``) are the
one place each operation is defined; the parts' own functions stay in the parts. Every
name is imported on first use (docs/ARCHITECTURE.md, "Start-up").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ..plans.backend import SandboxBackend
    from .registry import ADMIN, AGENT, HOST, WEB, Operation, Request, operations
    from .session import ProbeService

__all__ = [
    "ADMIN",
    "AGENT",
    "HOST",
    "WEB",
    "Operation",
    "ProbeService",
    "Request",
    "SandboxBackend",
    "operations",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__)
