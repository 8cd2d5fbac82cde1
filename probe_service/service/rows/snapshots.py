"""Rows over snapshots: capture (confined on machine faces), read, materialize, one file."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import Field

from ... import snapshot
from ...errors import NotFound, UnsafePath
from ...turns import lease_check
from ..capture_roots import confine_capture_root, git_confinement_roots
from ..registry import ADMIN, AGENT, HOST, WEB, Request, operation
from ..session import ProbeService
from .common import Frozen, SnapshotId, TurnId

__all__ = ["capture_refs", "capture_tree", "confined_root", "refuse_for_peer"]


class SnapshotCaptureRequest(Request):
    root: str = Field(
        min_length=1,
        description="Directory of the working tree to capture (read, never run); with ref, "
        "the repository (its top level, or a bare repository). On the host and MCP faces a "
        "relative path is taken from the face's --root, and the directory must lie inside "
        "the capture roots the administrator allows (a refusal lists them).",
        examples=[".", "/srv/checkouts/project"],
    )
    ref: str | None = Field(
        None,
        min_length=1,
        max_length=256,
        description="Capture the tree this git ref names (a branch, tag or commit id, with ~ "
        "or ^) straight from the repository's objects: no checkout, no index change, no "
        "hook or filter run; blobs as git stores them. Absent: the working tree.",
        examples=["origin/main", "HEAD", "v1.2.0"],
    )
    turn: TurnId | None = Field(
        None,
        description="Capture as this turn: the turn holding the workspace lease may "
        "capture under it (every other working-tree capture is refused meanwhile).",
    )


def _confined_path(svc: ProbeService, root: str) -> Path:
    if svc.capture_roots is None:
        return Path(root)
    protected = (svc.policy_file, svc.settings.signing_key)
    return confine_capture_root(root, svc.capture_roots, protected, svc.settings.home, svc.root)


def refuse_for_peer(svc: ProbeService, field: str, what: str) -> None:
    """Refuse ``what`` (an operation reading or writing a host path as the service's user
    where no per-path check exists yet) for a local-service caller who is not the
    service's own user (docs/ARCHITECTURE.md, "Local service"); raises UnsafePath naming
    ``field``."""
    peer = svc.context.peer
    if peer is not None and peer.reader() is not None:
        raise UnsafePath(
            f"{field}: {what} reads or writes host files as the service's user; through the "
            f"local service it is refused for uid {peer.uid} (run it in-process: unset "
            "PROBE_SERVE_SOCKET)"
        )


def _reader(svc: ProbeService) -> snapshot.Reader | None:
    """Whom a capture reads for: the local service's caller, unless that is the service's
    own user (docs/ARCHITECTURE.md, "Local service")."""
    peer = svc.context.peer
    return peer.reader() if peer is not None else None


def capture_tree(svc: ProbeService, path: Path, *, exact_root: bool) -> snapshot.CaptureResult:
    """Capture the working tree at ``path`` (already confined), as the session's local
    service caller may read it (``snapshot/as_reader.py``) when there is one."""
    reader = _reader(svc)
    check = reader.check if reader is not None else None
    return snapshot.snapshot_capture(svc.store, path, exact_root=exact_root, check_read=check)


def capture_refs(svc: ProbeService, repository: str, refs: list[str]) -> list[str]:
    """The snapshot ids of ``refs``' trees, captured from git objects of ``repository``
    (confined as ``snapshot_capture``'s root); every ref resolves before any capture.
    The rows that take refs share it."""
    path = _confined_path(svc, repository)
    roots = git_confinement_roots(path, svc.capture_roots, svc.settings.capture_roots)
    found = snapshot.snapshot_capture_refs(svc.store, path, refs, roots, reader=_reader(svc))
    return [result.snapshot_id for result in found]


@operation("snapshot_capture", long_running=True)
def snapshot_capture(svc: ProbeService, req: SnapshotCaptureRequest) -> snapshot.CaptureResult:
    """Capture a content-addressed snapshot of a working tree, or of a git ref's tree.
    It is stabilized and immutable; with ref the tree a commit, tag or branch names is
    read from the repository's objects (no checkout, no hook or filter; a tree captured
    before costs one lookup). Nothing in the tree is executed. The same content gives the
    same snapshot id; a submodule is recorded as a gitlink (path and commit). Refuses
    unreadable roots, names a materialization would refuse, trees over the file or size
    limits, a ref that does not exist or names a blob, and a repository whose .git file,
    objects or alternates lie outside the capture roots; a work tree that keeps changing
    is retried, then refused, and so is one another turn leases. On the host and MCP
    faces the root must lie inside the administrator's capture roots, and a relative root
    is taken from the face's --root."""
    path = _confined_path(svc, req.root)
    if req.ref is not None:
        roots = git_confinement_roots(path, svc.capture_roots, svc.settings.capture_roots)
        return snapshot.snapshot_capture_ref(svc.store, path, req.ref, roots, reader=_reader(svc))
    # docs/ARCHITECTURE.md, "The agent's turn": a working tree another turn leases is
    # not captured (a ref's tree is read from git objects, which no lease covers).
    lease_check(str(Path(os.path.realpath(path))), req.turn, datetime.now(UTC))
    # On a machine face the checked root has no link in it: read exactly that directory.
    return capture_tree(svc, path, exact_root=svc.capture_roots is not None)


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
    SHA-256. A submodule is a gitlink with its commit; attribute_notes names each
    .gitattributes line that would rewrite bytes on a checkout (eol, ident, filters,
    LFS). Refuses an id that is not stored."""
    from ...snapshot.attributes import attribute_notes

    stored = snapshot.load_snapshot(svc.store, req.snapshot_id)
    return stored.model_copy(update={"attribute_notes": attribute_notes(svc.store, stored)})


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
    kind: Literal["file", "symlink", "gitlink"]
    size: int
    sha256: str | None
    executable: bool
    target: str | None
    #: A gitlink's (submodule's) commit.
    commit: str | None = None
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
        commit=entry.commit,
        text=text,
        binary=binary,
        truncated=truncated,
    )
