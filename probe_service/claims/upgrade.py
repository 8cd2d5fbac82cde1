"""Baselines made by an older analyzer are recomputed, not misread.

A baseline carries the version of the analyzer that made it. When that version is not the
current one, the baseline is recomputed with today's analyzer at the claim's own snapshot
before it is compared with a target (docs/ARCHITECTURE.md, "Claims: analyzer versions").
The stored baseline row stays as it was (claims are immutable); when the claim's snapshot
or a blob it needs is gone, the old baseline is kept and reports "analyzer changed", so
the claim needs a recheck rather than being judged by rules it was not made under. A
``typescript_boundary`` baseline is never recomputed: a new analyzer reopens the claim.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy import select

from ..errors import InvalidClaim, NotFound
from .baselines import compute_baseline
from .models import Dependency, ExactBlobSpec, QueryDependencySpec
from .queries import ANALYZER_VERSION
from .records import Baseline, ExactBlobBaseline
from .rows import chunks
from .sources import SnapshotSource
from .tables import claims

__all__ = ["REOPENED_BY_NEW_ANALYZER", "is_outdated", "recompute_outdated"]


#: Kinds whose baseline of another analyzer version is never recomputed: the claim was
#: made on what the old analyzer showed (a compiler boundary: its consumers), so a new
#: analyzer reopens it, as the specification says an analyzer-version change does.
REOPENED_BY_NEW_ANALYZER = frozenset({"typescript_boundary"})


def is_outdated(baseline: Baseline) -> bool:
    """Whether another analyzer version made ``baseline``."""
    kind = "exact_blob" if isinstance(baseline, ExactBlobBaseline) else baseline.query.kind
    return baseline.analyzer_version != ANALYZER_VERSION[kind]


def _recomputable(baseline: Baseline) -> bool:
    if isinstance(baseline, ExactBlobBaseline):
        return is_outdated(baseline)
    return is_outdated(baseline) and baseline.query.kind not in REOPENED_BY_NEW_ANALYZER


def recompute_outdated(
    baselines: Mapping[str, Sequence[Baseline]], source: SnapshotSource
) -> dict[str, list[Baseline]]:
    """``baselines`` with each outdated one recomputed at its claim's snapshot."""
    outdated = sorted(cid for cid, group in baselines.items() if any(map(_recomputable, group)))
    result = {cid: list(group) for cid, group in baselines.items()}
    if not outdated:
        return result
    for claim_id, snapshot_id in _claim_snapshots(source, outdated).items():
        tree = source.tree(snapshot_id)
        if tree is None:
            continue
        group = result[claim_id]
        for position, baseline in enumerate(group):
            if not _recomputable(baseline):
                continue
            try:
                group[position] = compute_baseline(
                    position, _dependency(baseline), tree, allow_incomplete=True
                )
            except (InvalidClaim, NotFound):
                continue  # kept as it was: reports "analyzer changed"
    return result


def _dependency(baseline: Baseline) -> Dependency:
    if isinstance(baseline, ExactBlobBaseline):
        return Dependency(exact_blob=ExactBlobSpec(path=baseline.path))
    spec = QueryDependencySpec(query=baseline.query)
    if baseline.form == "query_set":
        return Dependency(query_set=spec)
    return Dependency(negative_query=spec)


def _claim_snapshots(source: SnapshotSource, claim_ids: Sequence[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    with source.store.reading() as conn:
        for part in chunks(claim_ids):
            rows = conn.execute(
                select(claims.c.claim_id, claims.c.snapshot_id).where(claims.c.claim_id.in_(part))
            )
            found.update((cid, snap) for cid, snap in rows)
    return found
