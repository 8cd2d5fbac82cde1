"""The service layer: one operation table behind every face (docs/ARCHITECTURE.md,
"The operation table").

``ProbeService.open(root=".")`` opens a session; every operation is a method of it
(``svc.probe_run(plan_id=…, policy_id=…)``) and ``svc.call(name, params)`` is the JSON form
the NDJSON host and the MCP server use. The plain functions over a store remain here too.
Every name is imported on first use (docs/ARCHITECTURE.md, "Start-up").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ..claims import (
        change_analyze,
        claim_check,
        claim_create,
        claim_show,
        claim_supersede,
        claim_withdraw,
        gate,
        knowledge_brief,
        knowledge_query,
        knowledge_record_answer,
        obligation_list,
        obligation_resolve,
    )
    from ..plans.backend import SandboxBackend
    from ..snapshot import snapshot_capture
    from ..typescript.boundary import typescript_boundary
    from .functions import (
        PlanCreated,
        capabilities,
        envelope_verify,
        knowledge_events,
        probe_get,
        probe_plan,
        probe_run,
        probe_run_queued,
        receipt_export,
        receipt_get,
        receipt_verify,
        revoked_signing_keys,
        run_cancel,
        signature_requirement,
        snapshot_get,
        snapshot_materialize,
    )
    from .registry import ADMIN, AGENT, HOST, Operation, Request, operations
    from .session import ProbeService

__all__ = [
    "ADMIN",
    "AGENT",
    "HOST",
    "Operation",
    "PlanCreated",
    "ProbeService",
    "Request",
    "SandboxBackend",
    "capabilities",
    "change_analyze",
    "claim_check",
    "claim_create",
    "claim_show",
    "claim_supersede",
    "claim_withdraw",
    "envelope_verify",
    "gate",
    "knowledge_brief",
    "knowledge_events",
    "knowledge_query",
    "knowledge_record_answer",
    "obligation_list",
    "obligation_resolve",
    "operations",
    "probe_get",
    "probe_plan",
    "probe_run",
    "probe_run_queued",
    "receipt_export",
    "receipt_get",
    "receipt_verify",
    "revoked_signing_keys",
    "run_cancel",
    "signature_requirement",
    "snapshot_capture",
    "snapshot_get",
    "snapshot_materialize",
    "typescript_boundary",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__)
