"""Tables of imported bundles (migration ``0013_bundles``); every row is inserted once.

They sit in the store so that every part can ask where an object came from (the claims
part refuses an imported receipt as a recheck) without importing the bundles part.

docs/ARCHITECTURE.md, "Bundles": ``bundle_imports`` keeps one row per bundle an import
wrote anything from; ``bundle_origins`` marks every object an import created (a claim, a
receipt, a plan, a snapshot …) with the bundle it came from, so a claim shows its origin and
an imported receipt is never taken as evidence rechecked here; ``imported_records`` keeps
the history a bundle carried (checks, obligations with their resolutions, audit entries)
apart from this store's own, so an imported resolution never closes an obligation here.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Column, Connection, ForeignKey, Integer, String, Table, Text, select

from .schema import metadata

__all__ = ["bundle_imports", "bundle_origins", "imported_from", "imported_records"]

bundle_imports = Table(
    "bundle_imports",
    metadata,
    #: SHA-256 of the bundle's manifest member.
    Column("bundle_id", String(64), primary_key=True),
    Column("format_version", Integer, nullable=False),
    #: The manifest's header (exported_at, engine, selection), as JSON.
    Column("header", Text, nullable=False),
    #: JSON: the fingerprints whose signatures verified, or ``[]`` with --allow-unsigned.
    Column("signers", Text, nullable=False),
    Column("allow_unsigned", Integer, nullable=False),
    Column("objects", Integer, nullable=False),
    Column("interface", String(32), nullable=False),
    Column("imported_by", String(128), nullable=True),
    Column("imported_at", String(32), nullable=False),
)

bundle_origins = Table(
    "bundle_origins",
    metadata,
    Column("kind", String(16), primary_key=True),
    Column("object_id", String(128), primary_key=True),
    Column("bundle_id", String(64), ForeignKey("bundle_imports.bundle_id"), nullable=False),
)

imported_records = Table(
    "imported_records",
    metadata,
    #: SHA-256 of ``body``: the same record carried twice is stored once.
    Column("digest", String(64), primary_key=True),
    Column("kind", String(16), nullable=False),
    Column("claim_id", String(40), nullable=False, index=True),
    Column("bundle_id", String(64), ForeignKey("bundle_imports.bundle_id"), nullable=False),
    Column("body", Text, nullable=False),
)


def imported_from(conn: Connection, kind: str, ids: Sequence[str]) -> dict[str, str]:
    """``{object id: bundle id}`` for those of ``ids`` (of ``kind``) an import created."""
    if not ids:
        return {}
    o = bundle_origins.c
    rows = conn.execute(
        select(o.object_id, o.bundle_id).where(o.kind == kind, o.object_id.in_(list(ids)))
    )
    return {str(object_id): str(bundle_id) for object_id, bundle_id in rows}
