"""``claim_check``: recheck named claims against a target snapshot.

Applicability is written to ``claim_checks`` (one row per claim and check) and announced as
a ``claim_applicability`` event; the recorded outcome is only echoed, never edited.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence

from sqlalchemy import Connection, insert

from ..errors import LimitExceeded, NotFound
from ..store import Store, append_events, utc_now
from .applicability import blobs_to_recheck, check_dependency, combine_checks
from .audit import append_audit
from .callers import PYTHON_CALLER, Caller, snapshots_for
from .digests import digest_json
from .records import Baseline, ClaimCheck, DependencyCheck
from .resolutions import close_current_again
from .rows import load_baselines, load_heads, reasons_json
from .scopes import require_claims_in_scope
from .sources import SnapshotSource
from .tables import claim_checks
from .upgrade import recompute_outdated

__all__ = ["MAX_CHECK_CLAIMS", "claim_check", "evaluate_claims", "record_checks"]

#: Most claims one ``claim_check`` call names.
MAX_CHECK_CLAIMS = 100_000


def claim_check(
    store: Store,
    claim_ids: Sequence[str],
    target_snapshot: str,
    *,
    scope: str | None = None,
    caller: Caller = PYTHON_CALLER,
    source: SnapshotSource | None = None,
) -> list[ClaimCheck]:
    """Applicability of each named claim at ``target_snapshot``, in the order named.

    A blob missing from the store gives ``unknown``; an open obligation on
    ``target_snapshot`` for a claim found current is resolved ``current_again``. Raises,
    before writing anything, NotFound when the store does not hold ``target_snapshot`` or
    a claim does not exist (in ``scope``, if given), InvalidInput when no claim belongs to
    ``scope``, LimitExceeded for too many ids.
    """
    if len(claim_ids) > MAX_CHECK_CLAIMS:
        raise LimitExceeded(f"claim_ids: more than {MAX_CHECK_CLAIMS}")
    source = source or snapshots_for(store, caller)
    source.require(target_snapshot, "target_snapshot")
    with store.reading() as conn:
        require_claims_in_scope(conn, scope)
        heads = load_heads(conn, claim_ids)
        for claim_id in claim_ids:
            if claim_id not in heads or (scope is not None and heads[claim_id][0] != scope):
                raise NotFound(
                    f"claim_ids: no claim {claim_id!r}" + (f" in scope {scope!r}" if scope else "")
                )
        baselines = load_baselines(conn, list(heads))
    checks = evaluate_claims(heads, baselines, target_snapshot, source)
    with store.transaction() as conn:
        record_checks(conn, checks, caller.face)
        close_current_again(conn, checks, caller.face)
    by_id = {c.claim_id: c for c in checks}
    return [by_id[claim_id] for claim_id in claim_ids]


def evaluate_claims(
    heads: Mapping[str, tuple[str, str]],
    baselines: Mapping[str, Sequence[Baseline]],
    snapshot_id: str,
    source: SnapshotSource,
) -> list[ClaimCheck]:
    """Compare each claim's baselines with the snapshot (outdated baselines are first
    recomputed at their claim's snapshot)."""
    baselines = recompute_outdated(baselines, source)
    tree = source.tree(snapshot_id)
    if tree is not None:
        source.prefetch(tree, blobs_to_recheck(_flatten(baselines, heads), tree))
    checks: list[ClaimCheck] = []
    reasons: tuple[str, ...]
    for claim_id, (scope, outcome) in heads.items():
        if tree is None:
            deps: list[DependencyCheck] = []
            state, reasons = "unknown", (f"snapshot {snapshot_id} is not in the store",)
        else:
            deps = [check_dependency(i, b, tree) for i, b in enumerate(baselines[claim_id])]
            state, reasons = combine_checks(deps)
        checks.append(_check(claim_id, scope, snapshot_id, outcome, state, reasons, deps))
    return checks


def _flatten(
    baselines: Mapping[str, Sequence[Baseline]], heads: Mapping[str, object]
) -> Iterator[Baseline]:
    for claim_id in heads:
        yield from baselines.get(claim_id, ())


def _check(
    claim_id: str,
    scope: str,
    snapshot_id: str,
    outcome: str,
    state: str,
    reasons: Sequence[str],
    deps: Sequence[DependencyCheck],
) -> ClaimCheck:
    return ClaimCheck.model_validate(
        {
            "claim_id": claim_id,
            "scope": scope,
            "snapshot_id": snapshot_id,
            "outcome": outcome,
            "state": state,
            "reasons": tuple(reasons),
            "dependencies": tuple(deps),
        }
    )


def record_checks(
    conn: Connection,
    checks: Iterable[ClaimCheck],
    interface: str,
    announced: Collection[str] = frozenset(),
) -> None:
    """Append check rows, an audit entry per scope, and an event per claim that is not
    current, unless its claim id is in ``announced`` (an obligation event said it already)."""
    rows = list(checks)
    if not rows:
        return
    now = utc_now()
    conn.execute(
        insert(claim_checks),
        [
            {
                "claim_id": c.claim_id,
                "scope": c.scope,
                "snapshot_id": c.snapshot_id,
                "state": c.state,
                "reasons": reasons_json(c.reasons),
                "checked_at": now,
            }
            for c in rows
        ],
    )
    # Events announce what a consumer must act on: a claim that is not current.
    append_events(
        conn,
        [
            (
                "claim_applicability",
                c.claim_id,
                {"scope": c.scope, "snapshot_id": c.snapshot_id, "state": c.state},
            )
            for c in rows
            if c.state != "current" and c.claim_id not in announced
        ],
    )
    by_scope: dict[str, list[ClaimCheck]] = {}
    for c in rows:
        by_scope.setdefault(c.scope, []).append(c)
    for scope, group in sorted(by_scope.items()):
        append_audit(
            conn,
            operation="claim_check",
            interface=interface,
            scope=scope,
            subject_ids=[c.claim_id for c in group],
            before=None,
            after=digest_json([[c.claim_id, c.snapshot_id, c.state] for c in group]),
        )
