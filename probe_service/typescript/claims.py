"""A TypeScript boundary as a claim dependency (``query_set`` / ``negative_query``).

docs/ARCHITECTURE.md, "TypeScript boundary": the result's matches are the consumers and
implementations (path, line, role, span SHA-256 and byte span); its identity is
``result_identity``; its domain digest is the cheap fingerprint of the TypeScript inputs,
so an unchanged fingerprint skips the compiler, and anything else reruns the worker on a
materialization of the target snapshot.
"""

from __future__ import annotations

from ..claims.models import TypeScriptBoundaryQuery
from ..claims.queries import ANALYZER_VERSION, typescript_domain
from ..claims.records import QueryMatch, QueryResult
from ..claims.views import TreeView
from .boundary import boundary_for_tree
from .models import BoundaryResult, BoundarySite

__all__ = ["evaluate_boundary_query", "query_result"]


def evaluate_boundary_query(query: TypeScriptBoundaryQuery, tree: TreeView) -> QueryResult:
    """Run the worker for ``query`` on ``tree``; raises BlobMissing like every query."""
    result = boundary_for_tree(
        tree, (query.symbol, query.file, query.max_results), domain_glob=query.domain
    )
    return query_result(query, tree, result)


def _match(site: BoundarySite) -> QueryMatch:
    return QueryMatch(
        path=site.path,
        line=site.line,
        role=site.role,
        text=f"sha256:{site.sha256} bytes:{site.start}-{site.end}",
    )


def query_result(
    query: TypeScriptBoundaryQuery, tree: TreeView, result: BoundaryResult
) -> QueryResult:
    """The claims view of ``result`` over ``query``'s domain in ``tree``."""
    domain = typescript_domain(query.domain, tree)
    notes = list(result.unknowns)
    if result.reason is not None:
        notes.insert(0, f"boundary unavailable: {result.reason}")
    identities = sorted({s.identity for s in (*result.definitions, *result.consumers)})
    return QueryResult(
        kind=query.kind,
        analyzer_version=ANALYZER_VERSION[query.kind],
        # The consumers and implementations are the matches (a negative dependency means
        # "none"); the definitions count in the result identity.
        matches=tuple(_match(s) for s in (*result.consumers, *result.implementations)),
        complete=result.complete,
        truncated=result.truncated,
        notes=tuple(notes),
        members=len(domain.members),
        membership_digest=domain.membership_digest,
        content_digest=domain.content_digest,
        result_digest=result.result_fingerprint,
        bytes_scanned=sum(m.size for m in domain.members),
        boundary={
            "adapter_version": result.adapter_version,
            "typescript_version": result.typescript_version,
            "status": result.status,
            "identities": ",".join(identities),
            "domain_fingerprint": result.domain_fingerprint or "",
            "resolution_fingerprint": result.resolution_fingerprint or "",
            "worker_digest": result.worker_digest or "",
        },
    )
