"""Bundles carried from another store (docs/ARCHITECTURE.md, "Bundles").

- ``bundle_imports``: one row per imported bundle that wrote anything: its manifest's
  digest, format version and header, the signers that verified, who imported it.
- ``bundle_origins``: each object an import created, marked with its bundle (a claim's
  origin; an imported receipt never counts as evidence rechecked here).
- ``imported_records``: the history a bundle carried (checks, obligations with their
  resolutions, audit entries), kept apart from this store's own.

New tables only: nothing already stored changes, and a store without imports is read as
before.

Revision ID: 0013_bundles
Revises: 0012_event_outbox
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013_bundles"
down_revision = "0012_event_outbox"


def upgrade() -> None:
    op.create_table(
        "bundle_imports",
        sa.Column("bundle_id", sa.String(64), primary_key=True),
        sa.Column("format_version", sa.Integer, nullable=False),
        sa.Column("header", sa.Text, nullable=False),
        sa.Column("signers", sa.Text, nullable=False),
        sa.Column("allow_unsigned", sa.Integer, nullable=False),
        sa.Column("objects", sa.Integer, nullable=False),
        sa.Column("interface", sa.String(32), nullable=False),
        sa.Column("imported_by", sa.String(128), nullable=True),
        sa.Column("imported_at", sa.String(32), nullable=False),
    )
    op.create_table(
        "bundle_origins",
        sa.Column("kind", sa.String(16), primary_key=True),
        sa.Column("object_id", sa.String(128), primary_key=True),
        sa.Column(
            "bundle_id",
            sa.String(64),
            sa.ForeignKey("bundle_imports.bundle_id"),
            nullable=False,
        ),
    )
    op.create_table(
        "imported_records",
        sa.Column("digest", sa.String(64), primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("claim_id", sa.String(40), nullable=False, index=True),
        sa.Column(
            "bundle_id",
            sa.String(64),
            sa.ForeignKey("bundle_imports.bundle_id"),
            nullable=False,
        ),
        sa.Column("body", sa.Text, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("imported_records")
    op.drop_table("bundle_origins")
    op.drop_table("bundle_imports")
