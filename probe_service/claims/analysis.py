"""``change_analyze``: obligations for the claims a change between two snapshots touches.

Affected claims are found through the dependency index, never by scanning every claim:
``claim_dep_paths`` is looked up by changed path, and ``claim_dep_domains`` by every
directory prefix of a changed path (a domain is indexed under the literal directory before
its first wildcard), then each distinct candidate glob is matched against the changed paths.
Only candidates are rechecked; those not ``current`` get one obligation each (unique per
claim and target snapshot, so the same analysis twice opens nothing new). Withdrawn and
superseded claims are not reopened: their successors carry the obligation.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sqlalchemy import Connection, select

from ..store import Store
from .audit import append_audit
from .callers import PYTHON_CALLER, Caller, snapshots_for
from .checking import evaluate_claims, record_checks
from .digests import digest_json
from .globs import ancestor_prefixes, compile_glob
from .obligations import open_obligations
from .records import ChangeAnalysis
from .resolutions import close_current_again
from .rows import chunks, load_baselines, load_heads
from .scopes import require_some_live_claim
from .sources import SnapshotSource
from .tables import claim_dep_domains, claim_dep_paths, claim_supersessions, claim_tombstones
from .views import TreeView, entry_fingerprint

__all__ = ["affected_claims", "change_analyze", "changed_paths"]


def change_analyze(
    store: Store,
    from_snapshot: str,
    to_snapshot: str,
    *,
    scope: str | None = None,
    caller: Caller = PYTHON_CALLER,
    source: SnapshotSource | None = None,
    allow_empty: bool = False,
) -> ChangeAnalysis:
    """Recheck the claims the change touches and open obligations for the stale ones.

    Raises, before writing anything, NotFound when either snapshot is not in the store and
    InvalidInput when the scope (or the store) holds no live claim, unless ``allow_empty``.
    """
    source = source or snapshots_for(store, caller)
    before = source.require(from_snapshot, "from_snapshot")
    after = source.require(to_snapshot, "to_snapshot")
    changed = changed_paths(before, after)
    with store.reading() as conn:
        require_some_live_claim(conn, scope, allow_empty=allow_empty)
        candidates = affected_claims(conn, changed, scope)
        heads = load_heads(conn, sorted(candidates))
        baselines = load_baselines(conn, list(heads))
    checks = evaluate_claims(heads, baselines, to_snapshot, source)
    with store.transaction() as conn:
        opened = open_obligations(conn, checks, from_snapshot, caller.face)
        # an obligation_opened event already carries the claim's applicability
        record_checks(conn, checks, caller.face, announced={o.claim_id for o in opened})
        close_current_again(conn, checks, caller.face)
        for group_scope in sorted({c.scope for c in checks}):
            append_audit(
                conn,
                operation="change_analyze",
                interface=caller.face,
                scope=group_scope,
                subject_ids=[from_snapshot, to_snapshot],
                before=None,
                after=digest_json(sorted(o.obligation_id for o in opened)),
            )
    return ChangeAnalysis(
        from_snapshot_id=from_snapshot,
        to_snapshot_id=to_snapshot,
        changed_paths=tuple(changed),
        candidates=len(candidates),
        checks=tuple(checks),
        opened=tuple(opened),
    )


def changed_paths(before: TreeView, after: TreeView) -> list[str]:
    """Paths added, removed, or with another digest or link target, sorted."""
    old, new = before.entries, after.entries
    changed = list(old.keys() - new.keys())
    for path, entry in new.items():
        prior = old.get(path)
        # The fingerprint is a function of these four fields: equal fields, equal
        # fingerprints, so only entries that differ in one pay for the comparison.
        if prior is None or (
            (
                (prior.kind, prior.digest, prior.executable, prior.target)
                != (entry.kind, entry.digest, entry.executable, entry.target)
                or entry.kind == "gitlink"  # its commit is in the fingerprint only
            )
            and entry_fingerprint(prior) != entry_fingerprint(entry)
        ):
            changed.append(path)
    return sorted(changed)


def affected_claims(conn: Connection, changed: Sequence[str], scope: str | None) -> set[str]:
    """Live claims (in ``scope``, if given) whose dependencies touch a changed path."""
    if not changed:
        return set()
    found = _by_exact_path(conn, changed, scope) | _by_domain(conn, changed, scope)
    return found - _retired(conn, sorted(found))


def _by_exact_path(conn: Connection, changed: Sequence[str], scope: str | None) -> set[str]:
    col = claim_dep_paths.c
    found: set[str] = set()
    for part in chunks(changed):
        query = select(col.claim_id).where(col.path.in_(part))
        if scope is not None:
            query = query.where(col.scope == scope)
        found.update(row[0] for row in conn.execute(query))
    return found


def _by_domain(conn: Connection, changed: Sequence[str], scope: str | None) -> set[str]:
    col = claim_dep_domains.c
    prefixes = sorted({pre for path in changed for pre in ancestor_prefixes(path)})
    by_glob: dict[str, set[str]] = {}
    for part in chunks(prefixes):
        query = select(col.glob, col.claim_id).where(col.prefix.in_(part))
        if scope is not None:
            query = query.where(col.scope == scope)
        for glob, claim_id in conn.execute(query):
            by_glob.setdefault(glob, set()).add(claim_id)
    found: set[str] = set()
    for glob, claim_ids in by_glob.items():
        matcher = compile_glob(glob)
        if any(matcher.matches(path) for path in _under(changed, matcher.prefix)):
            found |= claim_ids
    return found


def _under(changed: Sequence[str], prefix: str) -> Iterable[str]:
    return (path for path in changed if path.startswith(prefix))


def _retired(conn: Connection, claim_ids: Sequence[str]) -> set[str]:
    retired: set[str] = set()
    sup, tomb = claim_supersessions.c, claim_tombstones.c
    for part in chunks(claim_ids):
        retired.update(
            r[0]
            for r in conn.execute(select(sup.predecessor_id).where(sup.predecessor_id.in_(part)))
        )
        retired.update(
            r[0] for r in conn.execute(select(tomb.claim_id).where(tomb.claim_id.in_(part)))
        )
    return retired
