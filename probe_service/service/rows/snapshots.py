"""Rows over snapshots: capture (confined on machine faces), read, materialize, one file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field

from ... import snapshot
from ...errors import NotFound
from ..capture_roots import confine_capture_root
from ..registry import ADMIN, AGENT, HOST, WEB, Request, operation
from ..session import ProbeService
from .common import Frozen, SnapshotId

__all__ = ["confined_root"]


class SnapshotCaptureRequest(Request):
    root: str = Field(
        min_length=1,
        description="Directory of the working tree to capture (read, never run). On the host "
        "and MCP faces a relative path is taken from the face's --root, and the directory must "
        "lie inside the capture roots the administrator allows (a refusal lists them).",
        examples=[".", "/srv/checkouts/project"],
    )


@operation("snapshot_capture", long_running=True)
def snapshot_capture(svc: ProbeService, req: SnapshotCaptureRequest) -> snapshot.CaptureResult:
    """Capture a stabilized, immutable, content-addressed snapshot of a working tree.
    Nothing in the tree is executed. The same content gives the same snapshot id.
    Refuses unreadable roots, names a materialization would refuse, and trees over the
    file or size limits; a tree that keeps changing is retried, then refused. On the
    host and MCP faces the root must lie inside the administrator's capture roots, and a
    relative root is taken from the face's --root."""
    if svc.capture_roots is None:
        return snapshot.snapshot_capture(svc.store, Path(req.root))
    # The checked root has no link in it: the directory read must be exactly that one.
    return snapshot.snapshot_capture(svc.store, confined_root(svc, req.root), exact_root=True)


def confined_root(svc: ProbeService, requested: str) -> Path:
    """``requested`` resolved inside the session's capture roots (docs/ARCHITECTURE.md,
    "Faces": capture roots); resolved only, on a face that is not confined. Raises
    UnsafePath (``confine_capture_root``)."""
    if svc.capture_roots is None:
        return Path(os.path.realpath(requested))
    protected = (svc.policy_file, svc.settings.signing_key)
    home = svc.settings.home
    return confine_capture_root(requested, svc.capture_roots, protected, home, svc.root)


class SnapshotGetRequest(Request):
    snapshot_id: SnapshotId


@operation("snapshot_get", faces=AGENT | WEB)
def snapshot_get(svc: ProbeService, req: SnapshotGetRequest) -> snapshot.Snapshot:
    """Read a stored snapshot's manifest: every path with its kind, mode, size and
    SHA-256. Refuses an id that is not stored."""
    return snapshot.load_snapshot(svc.store, req.snapshot_id)


class SnapshotMaterializeRequest(Request):
    snapshot_id: SnapshotId
    dest: str = Field(min_length=1, description="An empty or absent directory to write to.")


class Materialized(Frozen):
    snapshot_id: str
    dest: str
    files: int


@operation("snapshot_materialize", faces=ADMIN, long_running=True)
def snapshot_materialize(svc: ProbeService, req: SnapshotMaterializeRequest) -> Materialized:
    """Rebuild a stored snapshot into a directory on this machine (administrators only:
    it writes to a path). Refuses a non-empty destination and links that escape."""
    snap = snapshot.snapshot_materialize(svc.store, req.snapshot_id, Path(req.dest))
    return Materialized(snapshot_id=snap.snapshot_id, dest=req.dest, files=snap.files)


class SnapshotFileRequest(Request):
    snapshot_id: SnapshotId
    entry: str = Field(
        min_length=1, max_length=4096, description="A path inside the snapshot (never the host's)."
    )
    max_bytes: int = Field(262_144, ge=1, le=1_048_576, description="At most 1 MiB.")


class SnapshotFile(Frozen):
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


@operation("snapshot_file", faces=HOST | WEB)
def snapshot_file(svc: ProbeService, req: SnapshotFileRequest) -> SnapshotFile:
    """One path of a stored snapshot: its entry and, for a file, its first max_bytes as
    text (repository content: untrusted data). Refuses a path the snapshot lacks."""
    stored = snapshot.load_snapshot(svc.store, req.snapshot_id)
    entry = stored.by_path().get(req.entry)
    if entry is None:
        raise NotFound(f"entry: {req.entry!r} is not in snapshot {req.snapshot_id}")
    text, binary, truncated = None, False, False
    if entry.kind == "file" and entry.digest is not None:
        data = snapshot.read_blob(svc.store, entry.digest)
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
