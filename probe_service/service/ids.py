"""Ids a person can type: a unique prefix of at least 8 hex characters stands for the id.

Prefixes are a CLI convenience only (the ``id_resolve`` row is on the CLI and Python faces);
machine faces (JSON output, the NDJSON host, MCP, queue messages) always carry full ids
(docs/ARCHITECTURE.md, "The operation table").
"""

from __future__ import annotations

import re

from sqlalchemy import Column, func, select, union

from ..errors import AmbiguousId
from ..store import Store

__all__ = ["MIN_PREFIX", "resolve_id"]

#: The shortest prefix accepted in place of a full id.
MIN_PREFIX = 8

_PREFIX = re.compile(r"^[0-9a-f]{8,63}$")


def _columns(kind: str) -> list[Column[str]]:
    # Imported here so that commands which never resolve an id skip these modules.
    from ..plans.tables import plans, receipts
    from ..queue.tables import runs
    from ..store.schema import snapshots

    return {
        "plan": [plans.c.plan_id],
        "snapshot": [snapshots.c.snapshot_id],
        "receipt": [receipts.c.receipt_sha256, receipts.c.run_id],
        "run": [runs.c.run_id],
    }[kind]


def resolve_id(store: Store, kind: str, value: str) -> str:
    """Return the one stored ``kind`` id that ``value`` is a prefix of, else ``value``.

    A full id, or a prefix matching nothing, is returned unchanged (the service then says
    NotFound). Raises AmbiguousId when the prefix matches more than one id.
    """
    if not _PREFIX.match(value):
        return value
    matching = union(
        *(select(column.label("id")).where(column.startswith(value)) for column in _columns(kind))
    ).subquery()
    with store.reading() as conn:
        found = [row[0] for row in conn.execute(select(matching.c.id).limit(2))]
        if len(found) > 1:
            total = conn.execute(select(func.count()).select_from(matching)).scalar_one()
            raise AmbiguousId(kind, value, int(total))
    return found[0] if found else value
