"""Wire models of a TypeScript boundary: sites, projects and the boundary itself."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = [
    "SEARCHED_NAMED",
    "BoundaryProject",
    "BoundaryResult",
    "BoundarySite",
    "BoundaryStatus",
]

#: The most searched files a boundary names (the count covers them all).
SEARCHED_NAMED = 50

#: ``complete``: a closed boundary; ``incomplete``: found what it could, with unknowns;
#: ``unavailable``: no answer (a budget, the sandbox or the worker failed);
#: ``inapplicable``: a complete discovery found no TypeScript/JavaScript or configuration.
BoundaryStatus = Literal["complete", "incomplete", "unavailable", "inapplicable"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class BoundarySite(_Frozen):
    """One definition or consumer: a byte span of a snapshot file and its SHA-256."""

    path: str
    start: int
    end: int
    line: int
    sha256: str
    #: Digest of the symbol's identity (its declarations), shared across projects.
    identity: str
    #: ``implementation``/``override``: a member implementing or overriding the requested
    #: interface or class member (listed under ``implementations``).
    role: Literal[
        "definition", "import", "export", "call", "reference", "implementation", "override"
    ]


class BoundaryProject(_Frozen):
    """One discovered compiler project (``config`` is ``None`` for the inferred one)."""

    config: str | None
    files: int


class BoundaryResult(_Frozen):
    """The definitions and consumers of one symbol in one snapshot, with completeness."""

    snapshot_id: str
    symbol: str
    file: str | None
    status: BoundaryStatus
    #: Machine-readable cause of ``unavailable`` (``input_budget``, ``output_budget`` …), or
    #: ``not_found``: no declaration of the symbol in the files searched.
    reason: str | None = None
    applicable: bool
    discovery_complete: bool
    complete: bool
    truncated: bool
    adapter_version: str
    typescript_version: str
    worker_digest: str | None = None
    projects: tuple[BoundaryProject, ...] = ()
    definitions: tuple[BoundarySite, ...] = ()
    consumers: tuple[BoundarySite, ...] = ()
    #: Implementations and overrides of a class or interface member.
    implementations: tuple[BoundarySite, ...] = ()
    unknowns: tuple[str, ...] = ()
    unavailable_packages: tuple[str, ...] = ()
    outside_reads: tuple[str, ...] = ()
    #: The symbol's name and every alias name the worker found: the identifier query set.
    identifiers: tuple[str, ...] = ()
    #: How many snapshot files the worker's projects analyzed, and the first of them by
    #: path (at most ``SEARCHED_NAMED``): what a ``not_found`` names.
    searched_count: int = 0
    searched: tuple[str, ...] = ()
    #: Our cheap fingerprint of the TypeScript inputs and configuration (the skip test).
    input_fingerprint: str
    #: The worker's fingerprint of the files its projects read, and of every resolution.
    domain_fingerprint: str | None = None
    resolution_fingerprint: str | None = None
    #: What a claim's result identity covers (see ``result_identity``).
    result_fingerprint: str
