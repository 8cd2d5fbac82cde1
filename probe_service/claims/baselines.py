"""Dependency baselines and span hashes, computed by the service from the snapshot itself.

The caller names what a claim depends on; everything it could forge (digests, query
results, domain membership, span hashes) is computed here, never accepted.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import InvalidClaim, NotFound
from .digests import digest_bytes, digest_json
from .models import Dependency, SpanRef
from .queries import ANALYZER_VERSION, evaluate_query
from .records import Baseline, EvidenceRecord, ExactBlobBaseline, QueryBaseline
from .views import BlobMissing, TreeView, entry_fingerprint

__all__ = ["boundary_key", "check_path", "compute_baseline", "compute_span"]


def check_path(path: str, field: str) -> str:
    """Return ``path`` if it is a clean relative POSIX path; raise InvalidClaim otherwise."""
    parts = path.split("/")
    if (
        path.startswith("/")
        or "\\" in path
        or "\x00" in path
        or any(part in ("", ".", "..") for part in parts)
    ):
        raise InvalidClaim(f"{field}: {path!r} is not a clean relative POSIX path")
    return path


def compute_baseline(
    position: int, dependency: Dependency, tree: TreeView, *, allow_incomplete: bool = False
) -> Baseline:
    """Capture one dependency at ``tree``.

    Raises InvalidClaim when a path is unsafe, a negative query already matches, or (unless
    ``allow_incomplete``) a negative query's result is incomplete; NotFound when a blob the
    query must read is missing from the store.
    """
    field = f"dependencies[{position}]"
    if dependency.exact_blob is not None:
        path = check_path(dependency.exact_blob.path, f"{field}.exact_blob.path")
        return ExactBlobBaseline(
            path=path,
            fingerprint=entry_fingerprint(tree.entries.get(path)),
            analyzer_version=ANALYZER_VERSION["exact_blob"],
        )
    form = "query_set" if dependency.query_set is not None else "negative_query"
    spec = dependency.query_set or dependency.negative_query
    assert spec is not None  # noqa: S101 - Dependency validates exactly one form
    try:
        result = evaluate_query(spec.query, tree)
    except BlobMissing as exc:
        raise NotFound(f"{field}: blob missing from the store: {exc}") from exc
    if form == "negative_query" and result.matches:
        raise InvalidClaim(
            f"{field}.negative_query: {len(result.matches)} match(es) at the snapshot "
            f"(first {result.matches[0].path}); a negative dependency needs an empty result"
        )
    # A TypeScript boundary that is not complete is never current either (docs/ARCHITECTURE.md,
    # "TypeScript boundary"), so its query_set is refused at birth the same way.
    never_current = form == "negative_query" or spec.query.kind == "typescript_boundary"
    if never_current and not result.complete and not allow_incomplete:
        # An incomplete negative baseline can never vouch for absence, so such a claim is
        # needs_recheck from birth (docs/ARCHITECTURE.md, "Claims: applicability").
        raise InvalidClaim(
            f"{field}.{form}: the result is incomplete at the snapshot "
            f"({'; '.join(result.notes[:3])}); the claim would never be applicable; "
            "record it anyway only with the explicit allow_incomplete override (--allow-incomplete)"
        )
    return QueryBaseline(
        form=form,
        query=spec.query,
        analyzer_version=result.analyzer_version,
        members=result.members,
        membership_digest=result.membership_digest,
        content_digest=result.content_digest,
        result_digest=result.result_digest,
        match_count=len(result.matches),
        complete=result.complete,
        truncated=result.truncated,
        # docs/ARCHITECTURE.md, "TypeScript boundary": compiler claims retain the consumer
        # locations, the worker's fingerprints and the identifier query set.
        matches=result.matches if result.boundary is not None else None,
        boundary=result.boundary,
        identifiers=result.identifiers,
    )


def compute_span(position: int, span: SpanRef, tree: TreeView) -> EvidenceRecord:
    """Hash the bytes of ``span`` in ``tree``.

    Raises InvalidClaim when the path is not a file of the snapshot or the range overruns it,
    NotFound when its blob is missing from the store.
    """
    field = f"evidence[{position}].span"
    path = check_path(span.path, f"{field}.path")
    entry = tree.entries.get(path)
    if entry is None or entry.kind != "file":
        raise InvalidClaim(f"{field}.path: {path!r} is not a file in the snapshot")
    if span.end > entry.size:
        raise InvalidClaim(f"{field}.end: {span.end} is past the end of {path} ({entry.size})")
    try:
        data = tree.read(entry)
    except BlobMissing as exc:
        raise NotFound(f"{field}: blob missing from the store: {exc}") from exc
    return EvidenceRecord(
        kind="span",
        path=path,
        start=span.start,
        end=span.end,
        sha256=digest_bytes(data[span.start : span.end]),
    )


def boundary_key(scope: str, statement: str, dependencies: Sequence[Dependency]) -> str:
    """Identity of "this statement with this boundary" in a scope, used by tombstones."""
    normalized = " ".join(statement.split()).casefold()
    named = sorted(digest_json(d.model_dump(exclude_none=True)) for d in dependencies)
    return digest_json({"scope": scope, "statement": normalized, "dependencies": named})
