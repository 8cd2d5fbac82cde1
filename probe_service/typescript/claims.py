"""A TypeScript boundary as a claim dependency (``query_set`` / ``negative_query``).

docs/ARCHITECTURE.md, "TypeScript boundary": the result's matches are the consumers and
implementations (path, line, role, span SHA-256 and byte span); its identity is
``result_identity``; its domain digest is the cheap fingerprint of the TypeScript inputs.
The identifier query set is the second signal: with the inputs and the identifier
occurrences outside the domain both unchanged the compiler is skipped; otherwise the
worker reruns on a materialization of the target snapshot, given the files outside the
domain where a boundary name newly occurs, and the result identities are compared.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ..claims.applicability import result_changed
from ..claims.models import TypeScriptBoundaryQuery
from ..claims.queries import ANALYZER_VERSION, typescript_domain
from ..claims.records import Applicability, QueryBaseline, QueryMatch, QueryResult
from ..claims.views import EntryLike, TreeView
from .boundary import boundary_for_tree
from .identifiers import (
    MAX_EXTRA_FILES,
    identifier_set,
    new_occurrences,
    outside_sources,
    scan_occurrences,
)
from .models import BoundaryResult, BoundarySite

__all__ = ["check_boundary", "checked_boundary", "evaluate_boundary_query", "query_result"]


def evaluate_boundary_query(
    query: TypeScriptBoundaryQuery, tree: TreeView, extras: Sequence[EntryLike] = ()
) -> QueryResult:
    """Run the worker for ``query`` on ``tree`` (plus ``extras``: files outside the domain
    it must analyze too), memoized on the tree; raises BlobMissing like every query."""
    key = ("ts-boundary", json.dumps([query.model_dump_json(), [e.path for e in extras]]))
    cached = tree.memo.get(key)
    if isinstance(cached, QueryResult):
        return cached
    result = boundary_for_tree(
        tree,
        (query.symbol, query.file, query.max_results),
        domain_glob=query.domain,
        extras=extras,
    )
    evaluated = query_result(query, tree, result)
    tree.memo[key] = evaluated
    return evaluated


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
    """The claims view of ``result`` over ``query``'s domain in ``tree``, with the
    identifier query set counted over the TS/JS files outside the domain.

    Raises BlobMissing when an outside file's blob cannot be read.
    """
    domain = typescript_domain(query.domain, tree)
    notes = list(result.unknowns)
    if result.reason is not None:
        notes.insert(0, f"boundary unavailable: {result.reason}")
    outside = outside_sources(tree, domain)
    names = result.identifiers or (query.symbol,)
    found = scan_occurrences(tree, outside, names)
    notes += found.notes
    identities = sorted({s.identity for s in (*result.definitions, *result.consumers)})
    return QueryResult(
        kind=query.kind,
        analyzer_version=ANALYZER_VERSION[query.kind],
        # The consumers and implementations are the matches (a negative dependency means
        # "none"); the definitions count in the result identity.
        matches=tuple(_match(s) for s in (*result.consumers, *result.implementations)),
        complete=result.complete and not found.notes,
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
        identifiers=identifier_set(names, outside, found),
    )


def check_boundary(baseline: QueryBaseline, tree: TreeView) -> tuple[Applicability, str]:
    """Applicability of a complete boundary baseline (of today's analyzer) at ``tree``.

    Raises BlobMissing when a blob the check must read cannot be read.
    """
    query = baseline.query
    assert isinstance(query, TypeScriptBoundaryQuery)  # noqa: S101 - the caller dispatches on kind
    ids = baseline.identifiers
    if ids is None:
        return "needs_recheck", "the baseline keeps no identifier query set"
    domain = typescript_domain(query.domain, tree)
    outside = outside_sources(tree, domain)
    inputs_same = domain.content_digest == baseline.content_digest
    extras: list[EntryLike] = []
    appeared: list[tuple[str, str, int]] = []
    if outside.digest != ids.outside_digest:
        found = scan_occurrences(tree, outside, ids.names)
        if found.notes:
            return "needs_recheck", "identifier query set incomplete: " + found.notes[0]
        appeared = new_occurrences(found.counts, ids.occurrences)
        paths = sorted({path for path, _, _ in appeared})
        if len(paths) > MAX_EXTRA_FILES:
            return "needs_recheck", (
                f"boundary names newly occur in {len(paths)} files outside the domain, more "
                f"than the {MAX_EXTRA_FILES} the compiler is given (first {paths[0]})"
            )
        extras = [tree.entries[p] for p in paths]
    if inputs_same and not extras:
        return "current", "TypeScript inputs and identifier occurrences unchanged; compiler skipped"
    result = evaluate_boundary_query(query, tree, extras)
    tree.memo[_checked_key(baseline)] = result
    news = _describe(appeared)
    if baseline.form == "negative_query":
        return _still_empty(result, news)
    if result.result_digest == baseline.result_digest:
        what = "domain changed" if not inputs_same else "new occurrence(s) outside the domain"
        return "current", f"{what}; result re-evaluated and unchanged{news}"
    reason = result_changed(baseline.match_count, result) + news
    if not result.complete and result.notes:
        reason += f"; {result.notes[0]}"
    return "needs_recheck", reason


def checked_boundary(baseline: QueryBaseline, tree: TreeView) -> QueryResult | None:
    """The result ``check_boundary`` computed for ``baseline`` on ``tree``, or None when it
    decided without running the compiler (the gate's report never runs it again)."""
    found = tree.memo.get(_checked_key(baseline))
    return found if isinstance(found, QueryResult) else None


def _checked_key(baseline: QueryBaseline) -> tuple[str, str]:
    return ("ts-boundary-checked", baseline.query.model_dump_json() + baseline.result_digest)


def _still_empty(result: QueryResult, news: str) -> tuple[Applicability, str]:
    """A negative boundary: current while the rerun is complete and lists no consumer."""
    if result.matches:
        return "needs_recheck", f"a match appeared: {result.matches[0].path}{news}"
    if not result.complete or result.truncated:
        return "needs_recheck", "re-evaluation incomplete: " + "; ".join(result.notes[:3])
    return "current", f"re-evaluated; still no consumer{news}"


def _describe(appeared: Sequence[tuple[str, str, int]]) -> str:
    if not appeared:
        return ""
    shown = ", ".join(f"{name} in {path}" for path, name, _ in appeared[:3])
    more = f" and {len(appeared) - 3} more" if len(appeared) > 3 else ""
    return f"; boundary names newly outside the domain: {shown}{more}"
