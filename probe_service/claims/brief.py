"""``knowledge_brief``: the pre-turn step as one call.

Before a code-anchored turn an agent needs the claims related to what it is about to do,
each with its applicability on the snapshot it is working on, and the obligations still
open in its scope (docs/ARCHITECTURE.md, "Claims: before a turn"). Nothing is executed.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from ..store import Store
from .callers import PYTHON_CALLER, Caller
from .records import KnowledgeHit, Obligation
from .resolutions import list_in
from .search import MAX_HITS, knowledge_query
from .sources import SnapshotSource

__all__ = ["KnowledgeBrief", "knowledge_brief"]


class KnowledgeBrief(BaseModel):
    """Related claims rechecked on ``snapshot_id`` and the open obligations of ``scope``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    snapshot_id: str
    scope: str
    claims: tuple[KnowledgeHit, ...]
    open_obligations: tuple[Obligation, ...]


def knowledge_brief(
    store: Store,
    snapshot_id: str,
    scope: str,
    text: str,
    *,
    limit: int = 20,
    caller: Caller = PYTHON_CALLER,
    source: SnapshotSource | None = None,
) -> KnowledgeBrief:
    """Claims of ``scope`` related to ``text`` with their applicability on ``snapshot_id``,
    and every open obligation of ``scope``.

    Raises InvalidClaim (empty text, ``limit`` outside 1..MAX_HITS).
    """
    hits = knowledge_query(
        store,
        scope=scope,
        target_snapshot=snapshot_id,
        text=text,
        limit=min(limit, MAX_HITS),
        caller=caller,
        source=source,
    )
    with store.reading() as conn:
        still_open = list_in(conn, scope=scope, state="open")
    return KnowledgeBrief(
        snapshot_id=snapshot_id,
        scope=scope,
        claims=tuple(hits),
        open_obligations=tuple(still_open),
    )
