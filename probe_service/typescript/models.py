"""Wire models of a TypeScript boundary: sites, projects and the boundary itself."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["BoundaryProject", "BoundaryResult", "BoundarySite", "BoundaryStatus"]

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
    role: Literal["definition", "import", "export", "call", "reference"]


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
    #: Machine-readable cause of ``unavailable`` (``input_budget``, ``output_budget`` …).
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
    unknowns: tuple[str, ...] = ()
    unavailable_packages: tuple[str, ...] = ()
    outside_reads: tuple[str, ...] = ()
    #: Our cheap fingerprint of the TypeScript inputs and configuration (the skip test).
    input_fingerprint: str
    #: The worker's fingerprint of the files its projects read, and of every resolution.
    domain_fingerprint: str | None = None
    resolution_fingerprint: str | None = None
    #: What a claim's result identity covers (see ``result_identity``).
    result_fingerprint: str
