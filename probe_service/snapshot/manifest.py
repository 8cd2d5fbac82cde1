"""Snapshot manifests: entries, canonical encoding and the snapshot id."""

from __future__ import annotations

import json
from typing import Any, Literal

import zstandard
from pydantic import BaseModel, ConfigDict, ValidationError

from ..canonical import canonical_json, sha256_hex
from ..errors import UnsafePath
from ..relpaths import check_relative_path

__all__ = ["Entry", "Snapshot", "check_snapshot_path", "decode_manifest", "encode_manifest"]


class Entry(BaseModel):
    """One path of a snapshot: a regular file (by digest) or a symlink (target as data)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    kind: Literal["file", "symlink"]
    executable: bool = False
    digest: str | None = None
    size: int = 0
    target: str | None = None

    def manifest_record(self) -> dict[str, Any]:
        """Return the fields that enter the canonical manifest for this entry."""
        if self.kind == "symlink":
            return symlink_record(self.path, str(self.target))
        return file_record(self.path, self.executable, str(self.digest), self.size)


class Snapshot(BaseModel):
    """An immutable snapshot; ``snapshot_id`` is the SHA-256 of its canonical manifest."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    snapshot_id: str
    entries: tuple[Entry, ...]

    @property
    def files(self) -> int:
        """Number of regular files."""
        return sum(1 for e in self.entries if e.kind == "file")

    @property
    def bytes(self) -> int:
        """Total size of the regular files."""
        return sum(e.size for e in self.entries if e.kind == "file")

    def by_path(self) -> dict[str, Entry]:
        """Return the entries keyed by path."""
        return {e.path: e for e in self.entries}


def check_snapshot_path(path: str) -> None:
    """Refuse a name no snapshot may hold; capture, show and materialize all ask this.

    One function, one message: a name capture accepts is one materialize accepts.
    Raises UnsafePath naming the path and the rule (or the depth/length limit).
    """
    check_relative_path(path, field="snapshot path")


def file_record(path: str, executable: bool, digest: str, size: int) -> dict[str, Any]:
    """Return the manifest record of a regular file."""
    return {"path": path, "kind": "file", "executable": executable, "digest": digest, "size": size}


def symlink_record(path: str, target: str) -> dict[str, Any]:
    """Return the manifest record of a symbolic link (its target is data, never followed)."""
    return {"path": path, "kind": "symlink", "target": target}


def encode_records(records: list[dict[str, Any]]) -> tuple[str, bytes]:
    """Return ``(snapshot_id, compressed manifest)`` for manifest records."""
    ordered = sorted(records, key=lambda r: str(r["path"]))
    raw = canonical_json({"version": 1, "entries": ordered})
    return sha256_hex(raw), zstandard.ZstdCompressor(level=3).compress(raw)


def encode_manifest(entries: list[Entry]) -> tuple[str, bytes]:
    """Return ``(snapshot_id, compressed manifest)`` for ``entries``."""
    return encode_records([e.manifest_record() for e in entries])


def decode_manifest(snapshot_id: str, blob: bytes) -> Snapshot:
    """Decode a stored manifest and check that it still hashes to ``snapshot_id``.

    Raises UnsafePath when the manifest is corrupt, does not match its id, or names a
    path that is not a clean relative path.
    """
    try:
        raw = zstandard.ZstdDecompressor().decompressobj().decompress(blob)
        records = json.loads(raw)["entries"]
        entries = tuple(Entry.model_validate(r) for r in records)
    except (zstandard.ZstdError, ValueError, KeyError, TypeError, ValidationError) as exc:
        raise UnsafePath(f"snapshot {snapshot_id}: manifest is corrupt ({exc})") from exc
    if sha256_hex(raw) != snapshot_id:
        raise UnsafePath(f"snapshot {snapshot_id}: manifest does not match its id")
    for entry in entries:
        check_snapshot_path(entry.path)
    return Snapshot(snapshot_id=snapshot_id, entries=entries)
