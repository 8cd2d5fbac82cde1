"""Store-backed ``TreeView``s: snapshots and blobs read through the snapshot part."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from sqlalchemy import select

from ..errors import NotFound
from ..snapshot import load_snapshot, read_blob
from ..snapshot.blobs import decompress_blob
from ..store import Store
from ..store.schema import blobs
from .rows import chunks
from .views import BlobMissing, BoundaryAnalyzer, TreeView

__all__ = ["SnapshotSource"]

#: Digests fetched per query by ``prefetch``.
PREFETCH_BATCH = 256


class SnapshotSource:
    """Loads snapshots as ``TreeView``s, keeping a few in memory (snapshots are immutable)."""

    def __init__(
        self, store: Store, boundary: BoundaryAnalyzer | None = None, max_cached: int = 8
    ) -> None:
        """``boundary`` runs the TypeScript boundary queries of the views it builds."""
        self.store = store
        self.boundary = boundary
        self.max_cached = max_cached
        self._trees: OrderedDict[str, TreeView] = OrderedDict()

    def tree(self, snapshot_id: str) -> TreeView | None:
        """The snapshot as a view, or ``None`` when the store does not hold it."""
        cached = self._trees.get(snapshot_id)
        if cached is not None:
            self._trees.move_to_end(snapshot_id)
            return cached
        try:
            snapshot = load_snapshot(self.store, snapshot_id)
        except NotFound:
            return None
        view = TreeView(snapshot_id, snapshot.by_path(), self._read_blob, self.boundary)
        self._trees[snapshot_id] = view
        if len(self._trees) > self.max_cached:
            self._trees.popitem(last=False)
        return view

    def require(self, snapshot_id: str, field: str = "snapshot_id") -> TreeView:
        """The snapshot as a view; raise NotFound naming ``field`` when it is missing."""
        view = self.tree(snapshot_id)
        if view is None:
            raise NotFound(f"{field}: no snapshot {snapshot_id!r} in the store")
        return view

    def prefetch(self, tree: TreeView, digests: Iterable[str]) -> None:
        """Load the blobs a recheck will read in batched queries instead of one by one.

        Digests the store does not hold are skipped: reading them later gives ``unknown``.
        """
        wanted = sorted({d for d in digests if not tree.has_blob(d)})
        with self.store.reading() as conn:
            for part in chunks(wanted, PREFETCH_BATCH):
                rows = conn.execute(
                    select(blobs.c.digest, blobs.c.data).where(blobs.c.digest.in_(part))
                )
                for digest, data in rows:
                    if not tree.remember(digest, decompress_blob(digest, data)):
                        return

    def _read_blob(self, digest: str) -> bytes:
        try:
            return read_blob(self.store, digest)
        except NotFound as exc:
            raise BlobMissing(digest) from exc
