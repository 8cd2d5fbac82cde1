"""Signed receipts: the DSSE envelope of each signed receipt, insert-only.

- ``receipt_signatures``: one row per signed receipt row (keyed by run), holding the
  signer's fingerprint (``keyid``) and the envelope (docs/ARCHITECTURE.md, "Signed receipts").
- ``claim_evidence`` and ``obligation_resolutions`` gain ``receipt_signer``: the fingerprint
  that signed a receipt evidence or a ``rechecked`` resolution's receipt, or ``unsigned``.

Revision ID: 0006_signatures
Revises: 0005_trust
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_signatures"
down_revision = "0005_trust"


def upgrade() -> None:
    op.create_table(
        "receipt_signatures",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("receipt_sha256", sa.String(64), nullable=False),
        sa.Column("keyid", sa.String(64), nullable=False),
        sa.Column("envelope", sa.Text, nullable=False),
        sa.Column("created_at", sa.String(32), nullable=False),
    )
    op.create_index(
        "ix_receipt_signatures_receipt_sha256", "receipt_signatures", ["receipt_sha256"]
    )
    with op.batch_alter_table("claim_evidence") as batch:
        batch.add_column(sa.Column("receipt_signer", sa.String(64), nullable=True))
    with op.batch_alter_table("obligation_resolutions") as batch:
        batch.add_column(sa.Column("receipt_signer", sa.String(64), nullable=True))
    if op.get_context().dialect.name == "postgresql":
        # probe_refuse_change() was created by 0002_plans for the receipts
        op.execute(
            "CREATE TRIGGER receipt_signatures_immutable BEFORE UPDATE OR DELETE ON "
            "receipt_signatures FOR EACH ROW EXECUTE FUNCTION probe_refuse_change()"
        )
    else:
        for action in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER receipt_signatures_no_{action.lower()} BEFORE {action} ON "
                "receipt_signatures BEGIN SELECT RAISE(ABORT, "
                "'receipt_signatures rows are immutable'); END"
            )


def downgrade() -> None:
    with op.batch_alter_table("obligation_resolutions") as batch:
        batch.drop_column("receipt_signer")
    with op.batch_alter_table("claim_evidence") as batch:
        batch.drop_column("receipt_signer")
    op.drop_table("receipt_signatures")
