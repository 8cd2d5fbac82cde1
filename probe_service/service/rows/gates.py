"""The row that gates a change between two git refs: the CI job's one command."""

from __future__ import annotations

from pydantic import Field

from ... import claims
from ...claims.records import ChangeAnalysis
from ..registry import operation
from ..session import ProbeService
from .claims import GateOptions, signature_check
from .common import Frozen
from .snapshots import capture_refs

__all__: list[str] = []

_REF = "A git ref (branch, tag or commit id, with ~ or ^) of the repository."


class GateChangeRequest(GateOptions):
    base: str = Field(
        min_length=1,
        max_length=256,
        description=f"The change's base. {_REF}",
        examples=["origin/main"],
    )
    head: str = Field(
        min_length=1, max_length=256, description=f"The change's head. {_REF}", examples=["HEAD"]
    )
    repository: str = Field(
        ".",
        min_length=1,
        description="The repository both refs are read from (its top level or a bare "
        "repository); confined to the capture roots on the host and MCP faces.",
    )


class GateChange(Frozen):
    base_snapshot_id: str
    head_snapshot_id: str
    change: ChangeAnalysis
    report: claims.GateReport


@operation("gate_change", long_running=True)
def gate_change(svc: ProbeService, req: GateChangeRequest) -> GateChange:
    """Gate a change between two git refs, a CI job's one call. It captures both trees
    from the repository's objects (no checkout; a tree captured before costs one lookup),
    runs change analysis between them (obligations open on the head for claims whose
    dependencies moved), then gates the head snapshot as gate does. Passes only when the
    head passes the gate. Refuses, writing nothing, a scope (or store) without a live
    claim unless allow_empty, a ref that does not exist or names a blob, and a repository
    outside the capture roots."""
    with svc.store.reading() as conn:  # before any capture: a refusal writes nothing
        claims.require_some_live_claim(conn, req.scope, allow_empty=req.allow_empty)
    base, head = capture_refs(svc, req.repository, [req.base, req.head])
    change = claims.change_analyze(
        svc.store, base, head, scope=req.scope, caller=svc.context, allow_empty=req.allow_empty
    )
    report = claims.gate(
        svc.store,
        head,
        scope=req.scope,
        caller=svc.context,
        require_signed=signature_check(svc, req.require_signed),
        allow_empty=req.allow_empty,
        fail_on_refuted=req.fail_on_refuted,
    )
    return GateChange(base_snapshot_id=base, head_snapshot_id=head, change=change, report=report)
