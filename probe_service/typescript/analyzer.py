"""The TypeScript boundary as the claims part's ``BoundaryAnalyzer``.

docs/ARCHITECTURE.md, "Layers": this part builds on the claims part's models, so claims
never imports it; a session hands ``TYPESCRIPT_BOUNDARY`` to every claims operation in its
``CallContext``, and a snapshot view runs ``typescript_boundary`` queries through it. The
worker's modules are imported on the first such query, not when a session opens
("Start-up": a command imports only what it touches).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..claims import TreeView
    from ..claims.models import TypeScriptBoundaryQuery
    from ..claims.records import Applicability, QueryBaseline, QueryResult

__all__ = ["TYPESCRIPT_BOUNDARY", "TypeScriptBoundary"]


class TypeScriptBoundary:
    """Evaluates and rechecks boundary queries with the worker (``typescript/claims.py``)."""

    def evaluate(self, query: TypeScriptBoundaryQuery, tree: TreeView) -> QueryResult:
        """The boundary's result on ``tree``; raises BlobMissing like every query."""
        from .claims import evaluate_boundary_query

        return evaluate_boundary_query(query, tree)

    def check(self, baseline: QueryBaseline, tree: TreeView) -> tuple[Applicability, str]:
        """Whether a boundary baseline still holds on ``tree``, and why."""
        from .claims import check_boundary

        return check_boundary(baseline, tree)


#: The one analyzer every session hands the claims part.
TYPESCRIPT_BOUNDARY = TypeScriptBoundary()
