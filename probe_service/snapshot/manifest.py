"""Snapshot manifests: entries, canonical encoding and the snapshot id."""

from __future__ import annotations

from collections.abc import Sequence
from json.encoder import encode_basestring
from typing import Any, Literal

import zstandard
from pydantic import BaseModel, ConfigDict, ValidationError

from ..canonical import canonical_json, sha256_hex
from ..errors import UnsafePath
from ..relpaths import check_relative_path

__all__ = [
    "Entry",
    "Snapshot",
    "check_snapshot_path",
    "check_snapshot_paths",
    "decode_manifest",
    "encode_manifest",
    "encode_records",
    "encode_tree",
    "gitlink_record",
]


class Entry(BaseModel):
    """One path of a snapshot: a regular file (by digest), a symlink (target as data) or
    a gitlink (a submodule: its path and commit, materialized as an empty directory)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    kind: Literal["file", "symlink", "gitlink"]
    executable: bool = False
    digest: str | None = None
    size: int = 0
    target: str | None = None
    #: A gitlink's commit (hex object id); None for files and links.
    commit: str | None = None

    def manifest_record(self) -> dict[str, Any]:
        """Return the fields that enter the canonical manifest for this entry."""
        if self.kind == "symlink":
            return symlink_record(self.path, str(self.target))
        if self.kind == "gitlink":
            return gitlink_record(self.path, str(self.commit))
        return file_record(self.path, self.executable, str(self.digest), self.size)


class Snapshot(BaseModel):
    """An immutable snapshot; ``snapshot_id`` is the SHA-256 of its canonical manifest."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    snapshot_id: str
    entries: tuple[Entry, ...]
    #: Git attributes in the snapshot's ``.gitattributes`` files that rewrite bytes on a
    #: checkout (``snapshot/attributes.py``); filled by ``snapshot_get``, never hashed.
    attribute_notes: tuple[str, ...] = ()

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


#: Substrings of ``"\x00" + "\x00".join(paths) + "\x00"`` that every unclean path puts
#: there: an empty component (a leading or trailing ``/``, or ``//``), a ``.`` or ``..``
#: component, a backslash. A NUL inside a path shows as one separator too many.
_UNCLEAN = (
    *(f"{sep}{name}{end}" for name in (".", "..") for sep in "\x00/" for end in "\x00/"),
    "\x00/",
    "/\x00",
    "//",
    "\\",
)
#: Paths of at most this many characters are within both limits of ``check_relative_path``:
#: at most 256 components (511 characters hold at most 255 separators) and at most
#: 3,072 UTF-8 bytes (4 bytes a character at most).
_SURELY_SHORT = min(2 * 256 - 1, 3072 // 4)


def check_snapshot_paths(paths: Sequence[str]) -> None:
    """``check_snapshot_path`` for every path, in order, at a fraction of its cost.

    A few substring scans of the joined list prove the common case clean; a list they
    cannot prove clean is checked path by path, so the refusal is the one the first bad
    path gets. Raises UnsafePath as ``check_snapshot_path`` does.
    """
    if _surely_clean(paths):
        return
    for path in paths:
        check_snapshot_path(path)


def _surely_clean(paths: Sequence[str]) -> bool:
    if not paths:
        return True
    joined = "\x00" + "\x00".join(paths) + "\x00"
    return (
        joined.count("\x00") == len(paths) + 1  # no NUL inside a path
        and min(map(len, paths)) > 0
        and max(map(len, paths)) <= _SURELY_SHORT
        and not any(part in joined for part in _UNCLEAN)
    )


def file_record(path: str, executable: bool, digest: str, size: int) -> dict[str, Any]:
    """Return the manifest record of a regular file."""
    return {"path": path, "kind": "file", "executable": executable, "digest": digest, "size": size}


def symlink_record(path: str, target: str) -> dict[str, Any]:
    """Return the manifest record of a symbolic link (its target is data, never followed)."""
    return {"path": path, "kind": "symlink", "target": target}


def gitlink_record(path: str, commit: str) -> dict[str, Any]:
    """Return the manifest record of a gitlink (a submodule's path and commit)."""
    return {"commit": commit, "kind": "gitlink", "path": path}


def encode_records(records: list[dict[str, Any]]) -> tuple[str, bytes]:
    """Return ``(snapshot_id, compressed manifest)`` for manifest records."""
    ordered = sorted(records, key=lambda r: str(r["path"]))
    return _finish(canonical_json({"version": 1, "entries": ordered}))


def encode_tree(
    files: Sequence[tuple[str, bool, str, int]],
    links: Sequence[tuple[str, str]],
    gitlinks: Sequence[tuple[str, str]] = (),
) -> tuple[str, bytes]:
    """``encode_records`` of ``file_record(*f)`` for ``files``, ``symlink_record(*l)`` for
    ``links`` and ``gitlink_record(*g)`` for ``gitlinks`` (paths unique, never a NUL),
    byte for byte, without building the records.

    The canonical form's fixed key order is written out and every string goes through
    the encoder ``canonical_json`` itself uses (``json``'s, with ``ensure_ascii`` off), so
    ids cannot drift; a test compares the two on generated trees.
    """
    items = [
        (
            path,
            f'{{"digest":{encode_basestring(digest)},"executable":'
            f'{"true" if executable else "false"},"kind":"file","path":{encode_basestring(path)},'
            f'"size":{int(size)}}}',
        )
        for path, executable, digest, size in files
    ]
    items.extend(
        (
            path,
            f'{{"kind":"symlink","path":{encode_basestring(path)},'
            f'"target":{encode_basestring(target)}}}',
        )
        for path, target in links
    )
    items.extend(
        (
            path,
            f'{{"commit":{encode_basestring(commit)},"kind":"gitlink",'
            f'"path":{encode_basestring(path)}}}',
        )
        for path, commit in gitlinks
    )
    items.sort()
    body = ",".join(text for _, text in items)
    return _finish(f'{{"entries":[{body}],"version":1}}'.encode())


def _finish(raw: bytes) -> tuple[str, bytes]:
    return sha256_hex(raw), zstandard.ZstdCompressor(level=3).compress(raw)


def encode_manifest(entries: list[Entry]) -> tuple[str, bytes]:
    """Return ``(snapshot_id, compressed manifest)`` for ``entries``."""
    return encode_records([e.manifest_record() for e in entries])


class _Manifest(BaseModel):
    """A stored manifest as parsed: its entries (other top-level keys are not read)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    entries: tuple[Entry, ...]


def decode_manifest(snapshot_id: str, blob: bytes) -> Snapshot:
    """Decode a stored manifest and check that it still hashes to ``snapshot_id``.

    Raises UnsafePath when the manifest is corrupt, does not match its id, or names a
    path that is not a clean relative path.
    """
    try:
        raw = zstandard.ZstdDecompressor().decompressobj().decompress(blob)
        # Parsed and validated in one pass of pydantic's JSON parser: a third of the cost
        # of json.loads and a validation a record (a change analysis loads two manifests).
        entries = _Manifest.model_validate_json(raw).entries
    except (zstandard.ZstdError, ValueError, ValidationError) as exc:
        raise UnsafePath(f"snapshot {snapshot_id}: manifest is corrupt ({exc})") from exc
    if sha256_hex(raw) != snapshot_id:
        raise UnsafePath(f"snapshot {snapshot_id}: manifest does not match its id")
    check_snapshot_paths([entry.path for entry in entries])
    return Snapshot.model_construct(snapshot_id=snapshot_id, entries=entries)
