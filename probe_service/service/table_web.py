"""Read-only rows of the operation table that the web view needs (docs/ARCHITECTURE.md,
"Web view"): the runs list, farm statistics, a claim's history, a gate preview and a
bounded snapshot file. None of them writes to the store; the web view calls only rows
listed in ``READ_ONLY`` (a test walks it).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..claims.history import ClaimHistory, GatePreview
from ..claims.history import claim_history as _claim_history
from ..claims.history import gate_preview as _gate_preview
from ..errors import NotFound
from ..queue.farm import FarmStats
from ..queue.farm import farm_stats as _farm_stats
from ..queue.listing import RunFilters, RunPage, list_runs
from ..snapshot.blobs import read_blob
from . import functions
from . import table as _table  # noqa: F401  (the core rows register first: the table's order)
from .registry import HOST, Request, operation
from .session import ProbeService

__all__ = ["READ_ONLY"]

#: Every operation the web view may call: each one only reads.
READ_ONLY = frozenset(
    {
        "run_list",
        "farm_stats",
        "claim_history",
        "gate_preview",
        "snapshot_file",
        "snapshot_get",
        "probe_get",
        "receipt_get",
        "receipt_verify",
        "claim_show",
        "obligation_list",
        "policy_list",
    }
)

_HEX64 = r"^[0-9a-f]{64}$"
_Label = Field(None, min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:-]+$")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class RunListRequest(Request):
    run_id: str | None = Field(None, pattern=r"^[0-9a-f]{32,64}$")
    batch_id: str | None = Field(None, pattern=r"^[0-9a-f]{32}$")
    outcome: Literal["supports", "refutes", "inconclusive"] | None = None
    reason: str | None = _Label
    policy_id: str | None = _Label
    snapshot_id: str | None = Field(None, pattern=_HEX64)
    state: Literal["queued", "running", "done"] | None = None
    limit: int = Field(50, ge=1, le=500, description="Page size (at most 500).")
    cursor: str | None = Field(
        None, max_length=100, description="next_cursor of the previous page."
    )


@operation("run_list")
def run_list(svc: ProbeService, req: RunListRequest) -> RunPage:
    """List runs newest first, queued ones (with batch, state, attempts) and those run
    in a process alike, filtered by run id, batch, outcome, reason, policy id, snapshot or state;
    pages of at most 500 with a cursor. Read-only; ids only, never policy bodies."""
    filters = RunFilters(
        run_id=req.run_id,
        batch_id=req.batch_id,
        outcome=req.outcome,
        reason=req.reason,
        policy_id=req.policy_id,
        snapshot_id=req.snapshot_id,
        state=req.state,
    )
    return list_runs(svc.store, filters, limit=req.limit, cursor=req.cursor)


class FarmStatsRequest(Request):
    window_hours: float = Field(24.0, gt=0, le=24 * 30)
    buckets: int = Field(24, ge=1, le=200)


@operation("farm_stats", faces=HOST)
def farm_stats(svc: ProbeService, req: FarmStatsRequest) -> FarmStats:
    """Queue depth, runs by state, outcomes and reasons, throughput and submit-to-receipt
    latency per time bucket over a window, and the workers seen recently. Read-only."""
    window_ms = int(req.window_hours * 3_600_000)
    return _farm_stats(svc.store, window_ms=window_ms, buckets=req.buckets)


class ClaimHistoryRequest(Request):
    claim_id: str = Field(pattern=r"^clm_[0-9a-f]{32}$", description="A claim id (clm_…).")
    scope: str | None = Field(None, max_length=200)
    limit: int = Field(200, ge=1, le=1000)


@operation("claim_history")
def claim_history(svc: ProbeService, req: ClaimHistoryRequest) -> ClaimHistory:
    """One claim's history: recorded checks, obligations with resolutions and rationale,
    the supersession chain, a tombstone, and the audit entries naming it. Read-only;
    refuses an id that is not stored."""
    return _claim_history(svc.store, req.claim_id, scope=req.scope, limit=req.limit)


class GatePreviewRequest(Request):
    snapshot_id: str = Field(pattern=_HEX64)
    scope: str | None = Field(None, max_length=200)


@operation("gate_preview")
def gate_preview(svc: ProbeService, req: GatePreviewRequest) -> GatePreview:
    """Whether the gate would pass a snapshot now (every live claim current, no open
    obligation on it), computed without opening, closing or recording anything."""
    return _gate_preview(svc.store, req.snapshot_id, scope=req.scope)


class SnapshotFileRequest(Request):
    snapshot_id: str = Field(pattern=_HEX64)
    entry: str = Field(
        min_length=1, max_length=4096, description="A path inside the snapshot (never the host's)."
    )
    max_bytes: int = Field(262_144, ge=1, le=1_048_576, description="At most 1 MiB.")


class SnapshotFile(_Frozen):
    snapshot_id: str
    path: str
    kind: Literal["file", "symlink"]
    size: int
    sha256: str | None
    executable: bool
    target: str | None
    text: str | None
    binary: bool
    truncated: bool


@operation("snapshot_file", faces=HOST)
def snapshot_file(svc: ProbeService, req: SnapshotFileRequest) -> SnapshotFile:
    """One path of a stored snapshot: its entry and, for a file, its first max_bytes as
    text (repository content: untrusted data). Refuses a path the snapshot lacks."""
    snapshot = functions.snapshot_get(svc.store, req.snapshot_id)
    entry = snapshot.by_path().get(req.entry)
    if entry is None:
        raise NotFound(f"entry: {req.entry!r} is not in snapshot {req.snapshot_id}")
    text, binary, truncated = None, False, False
    if entry.kind == "file" and entry.digest is not None:
        data = read_blob(svc.store, entry.digest)
        truncated = len(data) > req.max_bytes
        head = data[: req.max_bytes]
        binary = b"\x00" in head
        if not binary:
            text = head.decode("utf-8", errors="replace")
    return SnapshotFile(
        snapshot_id=req.snapshot_id,
        path=entry.path,
        kind=entry.kind,
        size=entry.size,
        sha256=entry.digest,
        executable=entry.executable,
        target=entry.target,
        text=text,
        binary=binary,
        truncated=truncated,
    )
