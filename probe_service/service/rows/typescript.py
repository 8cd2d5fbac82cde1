"""The TypeScript boundary row: a symbol's definitions and consumers in a snapshot."""

from __future__ import annotations

from pydantic import Field

from ...typescript import models
from ..registry import HOST, Request, operation
from ..session import ProbeService
from .common import SnapshotId

__all__: list[str] = []


class TypescriptBoundaryRequest(Request):
    snapshot_id: SnapshotId
    symbol: str = Field(min_length=1, max_length=512, description="The symbol's name.")
    # Not ``file``: this names a path inside the snapshot, never one on this machine.
    declared_in: str | None = Field(
        None, max_length=4096, description="The declaring file's path inside the snapshot."
    )
    max_results: int = Field(1000, ge=1, le=100_000)


@operation("typescript_boundary", faces=HOST, long_running=True)
def typescript_boundary(svc: ProbeService, req: TypescriptBoundaryRequest) -> models.BoundaryResult:
    """Resolve a TypeScript symbol's definitions, consumers (through every alias) and
    implementations from the materialized snapshot (never a working tree) with an
    isolated, pinned compiler in the sandbox. Its completeness signals: a result that is
    incomplete, truncated or unavailable says so and never counts as current for a claim;
    a symbol with no declaration is not_found, naming the files searched."""
    from ...typescript.boundary import typescript_boundary

    return typescript_boundary(
        svc.store, req.snapshot_id, req.symbol, req.declared_in, max_results=req.max_results
    )
