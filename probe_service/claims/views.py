"""The small read interface the pure parts (queries, baselines, applicability) run against.

A ``TreeView`` is one immutable snapshot: its entries by path and a way to read a blob.
The store-backed view lives in ``sources``; tests build views from plain dicts.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from ..errors import InternalError, NotFound
from .digests import digest_bytes, digest_json

if TYPE_CHECKING:
    from .models import TypeScriptBoundaryQuery
    from .records import Applicability, QueryBaseline, QueryResult

__all__ = [
    "BlobMissing",
    "BoundaryAnalyzer",
    "EntryLike",
    "MemoryEntry",
    "TreeView",
    "entry_fingerprint",
]


class BlobMissing(NotFound):
    """A blob a snapshot names cannot be read; applicability becomes ``unknown``."""

    code = "blob_missing"


class EntryLike(Protocol):
    """What the claims part needs from a snapshot entry."""

    @property
    def path(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def digest(self) -> str | None: ...
    @property
    def size(self) -> int: ...
    @property
    def target(self) -> str | None: ...
    @property
    def executable(self) -> bool: ...


@dataclass(frozen=True)
class MemoryEntry:
    """An in-memory entry, used by tests and benchmarks."""

    path: str
    kind: str
    digest: str | None
    size: int
    target: str | None = None
    executable: bool = False


class BoundaryAnalyzer(Protocol):
    """How a view evaluates and rechecks a ``typescript_boundary`` query.

    The typescript part implements it (``typescript/claims.py``) and the service hands it
    in: typescript builds on this part's models, so this part never imports it
    (docs/ARCHITECTURE.md, "Layers")."""

    def evaluate(self, query: TypeScriptBoundaryQuery, tree: TreeView) -> QueryResult:
        """The query's result on ``tree``; raises BlobMissing like every query."""
        ...

    def check(self, baseline: QueryBaseline, tree: TreeView) -> tuple[Applicability, str]:
        """Whether ``baseline`` still holds on ``tree``, and why."""
        ...


#: Blob bytes one view keeps in memory; beyond it blobs are read again when needed.
MAX_CACHED_BYTES = 128 << 20


@dataclass(frozen=True)
class TreeView:
    """One snapshot as the claims part sees it."""

    snapshot_id: str
    entries: Mapping[str, EntryLike]
    read_blob: Callable[[str], bytes]
    #: Runs TypeScript boundary queries; a view without one refuses them.
    boundary: BoundaryAnalyzer | None = field(default=None, compare=False, repr=False)
    _cache: dict[str, bytes] = field(default_factory=dict, compare=False, repr=False)
    _sorted: list[str] = field(default_factory=list, compare=False, repr=False)
    #: Results of deterministic computations over this immutable tree (domains, queries).
    memo: dict[tuple[str, str], object] = field(default_factory=dict, compare=False, repr=False)

    def boundary_analyzer(self) -> BoundaryAnalyzer:
        """The analyzer for TypeScript boundary queries; raises InternalError when the view
        was built without one (its caller did not pass the service's)."""
        if self.boundary is None:
            raise InternalError(
                f"snapshot {self.snapshot_id}: this view has no TypeScript boundary analyzer"
            )
        return self.boundary

    def paths_under(self, prefix: str) -> list[str]:
        """Sorted paths starting with ``prefix``, found by bisection (no full scan)."""
        if not self._sorted and self.entries:
            self._sorted.extend(sorted(self.entries))
        start = bisect.bisect_left(self._sorted, prefix)
        end = start
        while end < len(self._sorted) and self._sorted[end].startswith(prefix):
            end += 1
        return self._sorted[start:end]

    def read(self, entry: EntryLike) -> bytes:
        """Bytes of a file entry; raise BlobMissing when the store cannot produce them."""
        if entry.digest is None:
            raise BlobMissing(f"{entry.path}: not a file")
        cached = self._cache.get(entry.digest)
        if cached is None:
            cached = self.read_blob(entry.digest)
            self.remember(entry.digest, cached)
        return cached

    def remember(self, digest: str, data: bytes) -> bool:
        """Keep a blob's bytes while the cache has room; False once it is full."""
        used = self.memo.get(("blob-bytes", ""), 0)
        assert isinstance(used, int)  # noqa: S101 - only this method writes the key
        if used + len(data) > MAX_CACHED_BYTES:
            return False
        self._cache[digest] = data
        self.memo["blob-bytes", ""] = used + len(data)
        return True

    def has_blob(self, digest: str) -> bool:
        """Whether the bytes of ``digest`` are already in memory."""
        return digest in self._cache

    @classmethod
    def from_files(
        cls,
        files: Mapping[str, bytes | tuple[str, str] | tuple[str, bytes]],
        snapshot_id: str = "",
        boundary: BoundaryAnalyzer | None = None,
    ) -> TreeView:
        """Build a view from ``{path: bytes}`` (files), ``{path: ("symlink", target)}`` or
        ``{path: ("executable", bytes)}`` (files with the executable bit), running
        TypeScript boundary queries with ``boundary``."""
        entries: dict[str, EntryLike] = {}
        blobs: dict[str, bytes] = {}
        for path, content in files.items():
            executable = False
            if isinstance(content, tuple):
                if isinstance(content[1], str):
                    entries[path] = MemoryEntry(path, "symlink", None, len(content[1]), content[1])
                    continue
                executable, content = True, content[1]
            digest = digest_bytes(content)
            blobs[digest] = content
            entries[path] = MemoryEntry(path, "file", digest, len(content), None, executable)

        def read_blob(digest: str) -> bytes:
            try:
                return blobs[digest]
            except KeyError as exc:
                raise BlobMissing(digest) from exc

        fingerprints = sorted((path, entry_fingerprint(e)) for path, e in entries.items())
        return cls(snapshot_id or digest_json(fingerprints), entries, read_blob, boundary)


def entry_fingerprint(entry: EntryLike | None) -> str | None:
    """What an ``exact_blob`` dependency keeps: the file digest with its executable bit,
    the link target, or absence."""
    if entry is None:
        return None
    if entry.kind == "symlink":
        return f"symlink:{entry.target}"
    if entry.kind == "gitlink":  # a submodule: its recorded commit
        return f"gitlink:{getattr(entry, 'commit', None)}"
    return f"{'exec' if entry.executable else 'file'}:{entry.digest}"
