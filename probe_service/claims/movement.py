"""What moved: the concrete change behind a dependency that is no longer current.

The gate's report says, per open obligation, what changed between the claim's snapshot
and the gated one (docs/ARCHITECTURE.md, "The gate report"): a file's fingerprint before
and after, a query's matches added, removed and changed (a body edit shows the match whose
content changed, never "1 -> 1"), a symbol's consumers added and removed, an analyzer
version. Nothing here decides applicability (``applicability`` does); this only reads the
two trees again, through the results the check already memoized on them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from .models import (
    ContentGlobQuery,
    GrepQuery,
    PathGlobQuery,
    PythonSymbolQuery,
    QuerySpec,
    TypeScriptBoundaryQuery,
)
from .queries import ANALYZER_VERSION, evaluate_query
from .records import Baseline, DependencyCheck, ExactBlobBaseline, QueryBaseline, QueryMatch
from .views import BlobMissing, TreeView, entry_fingerprint

__all__ = [
    "MAX_SHOWN",
    "AnalyzerMoved",
    "FileMoved",
    "MatchChange",
    "Moved",
    "QueryMoved",
    "describe_movement",
    "describe_query",
]

#: Matches listed per kind of change (added, removed, changed); the rest are counted.
MAX_SHOWN = 10


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class FileMoved(_Frozen):
    """An ``exact_blob`` path: its fingerprint (``file:``/``exec:`` digest, ``symlink:``
    target) on the claim's snapshot and on the gated one; None is absent."""

    kind: Literal["file"] = "file"
    path: str
    before: str | None
    after: str | None


class MatchChange(_Frozen):
    """One match whose place stayed and whose content changed."""

    before: QueryMatch
    after: QueryMatch


class QueryMoved(_Frozen):
    """A query's result on the claim's snapshot and on the gated one."""

    kind: Literal["query"] = "query"
    #: The query in words (kind, pattern or symbol, domain).
    query: str
    #: The symbol of a ``python_symbol`` or ``typescript_boundary`` query: its matches are
    #: its definitions and consumers.
    symbol: str | None = None
    before_count: int
    after_count: int | None
    added: tuple[QueryMatch, ...] = ()
    removed: tuple[QueryMatch, ...] = ()
    changed: tuple[MatchChange, ...] = ()
    #: Changes not listed (beyond ``MAX_SHOWN`` of a kind).
    omitted: int = 0
    complete_after: bool | None = None
    #: What could not be compared, when something could not.
    note: str = ""


class AnalyzerMoved(_Frozen):
    """The analyzer that made the baseline is not today's (docs/ARCHITECTURE.md, "Claims:
    analyzer versions")."""

    kind: Literal["analyzer"] = "analyzer"
    before: str
    after: str


Moved = Annotated[FileMoved | QueryMoved | AnalyzerMoved, Field(discriminator="kind")]


def describe_query(query: QuerySpec) -> str:
    """A query in words: its kind, what it looks for and its domain."""
    if isinstance(query, GrepQuery):
        return f"grep{' -E' if query.regex else ''} {query.pattern!r} in {query.domain}"
    if isinstance(query, PathGlobQuery):
        return f"paths matching {query.domain}"
    if isinstance(query, ContentGlobQuery):
        return f"files and contents matching {query.domain}"
    if isinstance(query, PythonSymbolQuery):
        return f"python symbol {query.name} ({query.role}) in {query.domain}"
    assert isinstance(query, TypeScriptBoundaryQuery)  # noqa: S101 - the union is closed
    where = f" declared in {query.file}" if query.file else ""
    return f"TypeScript boundary of {query.symbol}{where} in {query.domain}"


def describe_movement(
    baseline: Baseline, check: DependencyCheck, before: TreeView | None, after: TreeView
) -> Moved | None:
    """What moved for one dependency ``check`` found not current on ``after``; ``before``
    is the claim's own snapshot (None when the store no longer holds it). None when the
    dependency is current."""
    if check.state == "current":
        return None
    kind = "exact_blob" if isinstance(baseline, ExactBlobBaseline) else baseline.query.kind
    if check.reason.startswith("analyzer changed"):
        return AnalyzerMoved(before=baseline.analyzer_version, after=ANALYZER_VERSION[kind])
    if isinstance(baseline, ExactBlobBaseline):
        now = entry_fingerprint(after.entries.get(baseline.path))
        return FileMoved(path=baseline.path, before=baseline.fingerprint, after=now)
    return _query_moved(baseline, before, after)


def _query_moved(baseline: QueryBaseline, before: TreeView | None, after: TreeView) -> QueryMoved:
    query = baseline.query
    symbol = query.name if isinstance(query, PythonSymbolQuery) else None
    words = describe_query(query)
    try:
        old = _before_matches(baseline, before)
        new = _after_result(baseline, after)
    except BlobMissing as exc:
        return QueryMoved(
            query=words,
            symbol=symbol,
            before_count=baseline.match_count,
            after_count=None,
            note=f"a blob is missing from the store: {exc}",
        )
    if isinstance(query, TypeScriptBoundaryQuery):
        symbol = query.symbol
    if new is None:
        return QueryMoved(
            query=words,
            symbol=symbol,
            before_count=baseline.match_count,
            after_count=None,
            note="the result on this snapshot was not computed (see the reason)",
        )
    matches, complete = new
    if old is None:
        return QueryMoved(
            query=words,
            symbol=symbol,
            before_count=baseline.match_count,
            after_count=len(matches),
            complete_after=complete,
            note="the claim's snapshot is no longer stored: its matches cannot be listed",
        )
    added, removed, changed = _diff(query, old, matches)
    omitted = sum(max(len(found) - MAX_SHOWN, 0) for found in (added, removed, changed))
    return QueryMoved(
        query=words,
        symbol=symbol,
        before_count=baseline.match_count,
        after_count=len(matches),
        added=tuple(added[:MAX_SHOWN]),
        removed=tuple(removed[:MAX_SHOWN]),
        changed=tuple(changed[:MAX_SHOWN]),
        omitted=omitted,
        complete_after=complete,
    )


def _before_matches(
    baseline: QueryBaseline, before: TreeView | None
) -> Sequence[QueryMatch] | None:
    """The baseline's matches: kept by a boundary baseline, else evaluated again on the
    claim's snapshot (the same analyzer on the same tree gives the same result)."""
    if baseline.matches is not None:
        return baseline.matches
    if baseline.match_count == 0:
        return ()
    if before is None:
        return None
    return evaluate_query(baseline.query, before).matches


def _after_result(
    baseline: QueryBaseline, after: TreeView
) -> tuple[Sequence[QueryMatch], bool] | None:
    """The matches on the gated snapshot and whether the result is complete; a boundary's
    result only when the check computed it (the compiler is never run again here)."""
    if isinstance(baseline.query, TypeScriptBoundaryQuery):
        # Imported here: the worker's module builds on this one.
        from ..typescript.claims import checked_boundary

        found = checked_boundary(baseline, after)
        return None if found is None else (found.matches, found.complete)
    result = evaluate_query(baseline.query, after)
    return result.matches, result.complete


def _identity(query: QuerySpec, match: QueryMatch) -> tuple[object, ...]:
    # What the result digest counts (queries._identity): a python_symbol match is the
    # same wherever it moved; other matches are the same only in the same place.
    if isinstance(query, PythonSymbolQuery):
        return (match.path, match.role, match.text)
    return (match.path, match.line, match.column, match.role, match.text)


def _diff(
    query: QuerySpec, old: Sequence[QueryMatch], new: Sequence[QueryMatch]
) -> tuple[list[QueryMatch], list[QueryMatch], list[MatchChange]]:
    """Matches added and removed, with a removed and an added one at the same path and
    role (the same line first) paired as one changed match."""
    before = Counter(_identity(query, m) for m in old)
    after = Counter(_identity(query, m) for m in new)
    removed = _take(old, before - after, query)
    added = _take(new, after - before, query)
    changed: list[MatchChange] = []
    for exact_line in (True, False):
        for gone in list(removed):
            partner = next(
                (
                    m
                    for m in added
                    if (m.path, m.role) == (gone.path, gone.role)
                    and (m.line == gone.line or not exact_line)
                ),
                None,
            )
            if partner is not None:
                removed.remove(gone)
                added.remove(partner)
                changed.append(MatchChange(before=gone, after=partner))
    return added, removed, changed


def _take(
    matches: Sequence[QueryMatch], wanted: Counter[tuple[object, ...]], query: QuerySpec
) -> list[QueryMatch]:
    """The matches whose identity ``wanted`` counts, as many of each as it counts."""
    left = Counter(wanted)
    taken: list[QueryMatch] = []
    for match in matches:
        key = _identity(query, match)
        if left[key] > 0:
            left[key] -= 1
            taken.append(match)
    return taken
