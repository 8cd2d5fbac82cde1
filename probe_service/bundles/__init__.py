"""Bundles: one versioned file carrying snapshots, plans, signed receipts and claims with
their history from one store to another (docs/ARCHITECTURE.md, "Bundles")."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .api import (
        BundleExported,
        BundleVerified,
        export_bundle,
        import_bundle_file,
        verify_bundle,
    )
    from .collect import Selection
    from .format import FORMAT_VERSION, BundleLimits
    from .importer import ImportResult

__all__ = [
    "FORMAT_VERSION",
    "BundleExported",
    "BundleLimits",
    "BundleVerified",
    "ImportResult",
    "Selection",
    "export_bundle",
    "import_bundle_file",
    "verify_bundle",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__)
