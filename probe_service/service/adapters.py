"""What a face needs beside the table: the response types it formats and the helpers that
present them, so adapters never import the parts behind the table (docs/ARCHITECTURE.md,
"The operation table"). Each name is imported on first use ("Start-up")."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ..claims import (
        RESOLUTIONS,
        ChangeAnalysis,
        ClaimCheck,
        GateReport,
        KnowledgeHit,
        Obligation,
        RecheckReport,
        ReviewRequest,
        batches_under_way,
    )
    from ..claims.gate_junit import render_gate_junit
    from ..claims.gate_render import render_gate_markdown, render_gate_text
    from ..claims.recheck_records import RecheckEntry
    from ..plans import ProbeRunResult
    from ..plans.output import kept_output
    from ..plans.phases import phase_seconds
    from ..plans.receipt_model import Receipt, parse_receipt
    from ..plans.receipt_parts import CommittedConfirmation
    from ..plans.receipt_schema import receipt_schema
    from ..plans.signing import read_public_key
    from ..plans.summary import (
        ConfirmationSummary,
        ReceiptSummary,
        summarize_receipt,
        summary_json,
    )
    from ..policies import turn_posture
    from ..policies.clearing import CLEARED, ClearingRule
    from ..queue import RunStatus, RunSummary
    from ..sandbox.policy_check import PolicyReport
    from ..store import Event
    from ..toolchains import ToolchainDigest
    from ..typescript.models import BoundaryResult

__all__ = [
    "CLEARED",
    "RESOLUTIONS",
    "BoundaryResult",
    "ChangeAnalysis",
    "ClaimCheck",
    "ClearingRule",
    "CommittedConfirmation",
    "ConfirmationSummary",
    "Event",
    "GateReport",
    "KnowledgeHit",
    "Obligation",
    "PolicyReport",
    "ProbeRunResult",
    "Receipt",
    "ReceiptSummary",
    "RecheckEntry",
    "RecheckReport",
    "ReviewRequest",
    "RunStatus",
    "RunSummary",
    "ToolchainDigest",
    "batches_under_way",
    "kept_output",
    "parse_receipt",
    "phase_seconds",
    "read_public_key",
    "receipt_schema",
    "render_gate_junit",
    "render_gate_markdown",
    "render_gate_text",
    "summarize_receipt",
    "summary_json",
    "turn_posture",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__)
