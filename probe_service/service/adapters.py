"""What a face needs beside the table: the response types it formats and the helpers that
present them, so adapters never import the parts behind the table (docs/ARCHITECTURE.md,
"The operation table")."""

from __future__ import annotations

from ..claims import RESOLUTIONS, ClaimCheck, KnowledgeHit, Obligation
from ..plans import ProbeRunResult
from ..plans.output import kept_output
from ..queue import RunSummary
from ..store import Event
from ..toolchains import ToolchainDigest
from ..toolchains.verify import PolicyReport
from ..typescript.models import BoundaryResult

__all__ = [
    "RESOLUTIONS",
    "BoundaryResult",
    "ClaimCheck",
    "Event",
    "KnowledgeHit",
    "Obligation",
    "PolicyReport",
    "ProbeRunResult",
    "RunSummary",
    "ToolchainDigest",
    "kept_output",
]
