"""Small read operations that belong to no other module."""

from __future__ import annotations

from ..store import Store
from .records import ClaimRecord
from .rows import load_claim

__all__ = ["claim_show"]


def claim_show(store: Store, claim_id: str, *, scope: str | None = None) -> ClaimRecord:
    """Read one claim with its evidence, baselines and links; raise NotFound when absent."""
    with store.reading() as conn:
        return load_claim(conn, claim_id, scope)
