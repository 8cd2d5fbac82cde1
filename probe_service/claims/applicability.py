"""Applicability rules: does a stored baseline still hold at a target snapshot?

Rules (docs/ARCHITECTURE.md, "Claims: applicability"):

- ``exact_blob``: digest or executable bit changed, created or deleted, or another
  analyzer version → ``needs_recheck``;
- ``query_set``: a different bounded result (matches, completeness, truncation) or another
  analyzer version → ``needs_recheck``; a ``typescript_boundary`` also reruns the compiler
  when its identifier query set finds a new occurrence outside the domain
  (``typescript.claims.check_boundary``);
- ``negative_query``: an incomplete baseline or another analyzer version → ``needs_recheck``;
  a changed domain is re-evaluated completely: still empty and complete → ``current``
  (an added non-match never reopens the claim), a match or an incomplete result →
  ``needs_recheck``;
- a blob that cannot be read → ``unknown``.

An unchanged domain (same paths, same digests) gives the same result by determinism, so it
is ``current`` without reading a blob. The outcome is never consulted or edited here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .queries import ANALYZER_VERSION, MAX_FILE_BYTES, evaluate_query, query_domain
from .records import (
    Applicability,
    Baseline,
    DependencyCheck,
    ExactBlobBaseline,
    QueryBaseline,
    QueryResult,
)
from .views import BlobMissing, TreeView, entry_fingerprint

__all__ = ["blobs_to_recheck", "check_dependency", "combine_checks", "result_changed"]

#: needs_recheck is known-stale, unknown is cannot-tell; either opens an obligation.
_SEVERITY: dict[Applicability, int] = {"current": 0, "unknown": 1, "needs_recheck": 2}


def check_dependency(position: int, baseline: Baseline, tree: TreeView) -> DependencyCheck:
    """Applicability of one baseline at ``tree``."""
    if isinstance(baseline, ExactBlobBaseline):
        state, reason = _check_exact(baseline, tree)
    else:
        try:
            state, reason = _check_query(baseline, tree)
        except BlobMissing as exc:
            state, reason = "unknown", f"blob missing from the store: {exc}"
    return DependencyCheck(position=position, form=baseline.form, state=state, reason=reason)


def combine_checks(checks: Sequence[DependencyCheck]) -> tuple[Applicability, tuple[str, ...]]:
    """The claim's applicability: its worst dependency, with the reasons of the others."""
    state: Applicability = "current"
    for check in checks:
        if _SEVERITY[check.state] > _SEVERITY[state]:
            state = check.state
    reasons = tuple(
        f"dependencies[{c.position}] {c.form}: {c.reason}" for c in checks if c.state != "current"
    )
    return state, reasons


def blobs_to_recheck(baselines: Iterable[Baseline], tree: TreeView) -> set[str]:
    """Digests a recheck will read: files of query domains whose content changed."""
    wanted: set[str] = set()
    for baseline in baselines:
        if not isinstance(baseline, QueryBaseline) or _decided_without_reading(baseline):
            continue
        domain = query_domain(baseline.query, tree)
        if domain.content_digest == baseline.content_digest:
            continue
        wanted.update(
            m.digest
            for m in domain.members
            if m.kind == "file" and m.digest is not None and m.size <= MAX_FILE_BYTES
        )
    return wanted


def _decided_without_reading(baseline: QueryBaseline) -> bool:
    stale_version = baseline.analyzer_version != ANALYZER_VERSION[baseline.query.kind]
    if baseline.query.kind == "typescript_boundary" and (
        not baseline.complete or baseline.truncated
    ):
        return True
    return stale_version or (baseline.form == "negative_query" and not baseline.complete)


def result_changed(before_count: int, result: QueryResult) -> str:
    """The reason of a query result that changed; with as many matches as before it says
    that their content changed (never "1 -> 1": the gate's report lists which)."""
    if before_count == len(result.matches):
        counted = f"the same {before_count} match(es), content changed"
    else:
        counted = f"{before_count} -> {len(result.matches)} match(es)"
    return f"result changed: {counted}, complete={result.complete}, truncated={result.truncated}"


def _check_exact(baseline: ExactBlobBaseline, tree: TreeView) -> tuple[Applicability, str]:
    if baseline.analyzer_version != ANALYZER_VERSION["exact_blob"]:
        return "needs_recheck", (
            f"analyzer changed: {baseline.analyzer_version} -> {ANALYZER_VERSION['exact_blob']}"
        )
    now = entry_fingerprint(tree.entries.get(baseline.path))
    if now == baseline.fingerprint:
        return "current", f"{baseline.path} unchanged"
    if baseline.fingerprint is None:
        return "needs_recheck", f"{baseline.path} was created"
    if now is None:
        return "needs_recheck", f"{baseline.path} was deleted"
    return "needs_recheck", f"{baseline.path} changed"


def _check_query(baseline: QueryBaseline, tree: TreeView) -> tuple[Applicability, str]:
    kind = baseline.query.kind
    if baseline.analyzer_version != ANALYZER_VERSION[kind]:
        return "needs_recheck", (
            f"analyzer changed: {baseline.analyzer_version} -> {ANALYZER_VERSION[kind]}"
        )
    if baseline.form == "negative_query" and not baseline.complete:
        return "needs_recheck", "baseline result was incomplete"
    if kind == "typescript_boundary":
        if not baseline.complete or baseline.truncated:
            # docs/ARCHITECTURE.md, "TypeScript boundary": an incomplete or truncated
            # boundary never counts as current, not even on an unchanged snapshot.
            return "needs_recheck", "baseline boundary was incomplete or truncated"
        return tree.boundary_analyzer().check(baseline, tree)
    if query_domain(baseline.query, tree).content_digest == baseline.content_digest:
        return "current", "domain unchanged"
    result = evaluate_query(baseline.query, tree)
    if baseline.form == "query_set":
        if result.result_digest == baseline.result_digest:
            return "current", "domain changed; result re-evaluated and unchanged"
        return "needs_recheck", result_changed(baseline.match_count, result)
    if result.matches:
        return "needs_recheck", f"a match appeared: {result.matches[0].path}"
    if not result.complete:
        return "needs_recheck", "re-evaluation incomplete: " + "; ".join(result.notes[:3])
    membership = (
        "membership changed"
        if result.membership_digest != baseline.membership_digest
        else "members changed"
    )
    return "current", f"{membership} ({baseline.members} -> {result.members}); still no match"
