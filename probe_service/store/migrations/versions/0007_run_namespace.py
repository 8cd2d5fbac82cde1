"""Runs remember the queue namespace they were submitted to.

- ``runs.namespace``: the Redis key namespace (``PROBE_REDIS_NAMESPACE``) of the queue the
  run was submitted to. A janitor re-sends, and a worker executes, only runs of its own
  namespace (docs/ARCHITECTURE.md, "Queue namespaces").
- Rows written before this revision get ``byte-probe``, the namespace every queue used
  unless ``PROBE_REDIS_NAMESPACE`` was set: a store cannot know what a process's
  environment was, and the default is what the code assumed when it wrote them.

Revision ID: 0007_run_namespace
Revises: 0006_signatures
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_run_namespace"
down_revision = "0006_signatures"

#: Kept literal: a migration must not change when the package's constant does.
_LEGACY_NAMESPACE = "byte-probe"


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(
            sa.Column(
                "namespace",
                sa.String(128),
                nullable=False,
                server_default=_LEGACY_NAMESPACE,
            )
        )
    # The janitor's scans filter by namespace first, then state.
    op.create_index("ix_runs_namespace_state", "runs", ["namespace", "state"])


def downgrade() -> None:
    op.drop_index("ix_runs_namespace_state", table_name="runs")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("namespace")
