"""Snapshots: capture (enumerate, stream, hash, compress), the blob codec, materialize."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .as_reader import Reader
    from .blobs import read_blob
    from .capture import DEFAULT_LIMITS, CaptureLimits, CaptureResult, snapshot_capture
    from .manifest import Entry, Snapshot
    from .materialize import check_manifest_paths, load_snapshot, snapshot_materialize
    from .refcapture import snapshot_capture_ref, snapshot_capture_refs

__all__ = [
    "DEFAULT_LIMITS",
    "CaptureLimits",
    "CaptureResult",
    "Entry",
    "Reader",
    "Snapshot",
    "check_manifest_paths",
    "load_snapshot",
    "read_blob",
    "snapshot_capture",
    "snapshot_capture_ref",
    "snapshot_capture_refs",
    "snapshot_materialize",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__)
