"""``byte-probe gc``: mark from the floors, then sweep in audited batches
(docs/ARCHITECTURE.md, "Retention and gc")."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict

from ..errors import PolicyError, StoreUnavailable
from ..policies.retention import RETAINED_KINDS, Retention, retention_digest
from ..rundirs import sweep_stale_run_dirs
from ..store import Store
from ..store.events import event_floor
from ..store.migrate import current_revisions, schema_head
from .lock import gc_lock
from .mark import Candidates, Marked, cutoff, mark_blobs, mark_rows, to_ms
from .roots import floor_roots
from .sweep import (
    Removed,
    Sweeper,
    delete_blobs,
    delete_envelopes,
    delete_events,
    delete_plans,
    delete_receipts,
    delete_snapshots,
)

__all__ = ["GcReport", "KindFigures", "collect_garbage"]


class KindFigures(BaseModel):
    """What gc removed (or, in a dry run, would remove) of one kind."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str
    removed: int
    logical_bytes: int
    stored_bytes: int


class GcReport(BaseModel):
    """One gc: per kind, how many objects and bytes; the batches it committed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dry_run: bool
    policy_digest: str
    grace_minutes: int
    kinds: list[KindFigures]
    batches: int
    event_floor: int
    #: Run directories of dead processes removed from this host's temporary directory
    #: (a worker also sweeps them before its first run); 0 in a dry run.
    run_dirs_swept: int = 0


def _require_current_schema(store: Store) -> None:
    """Refuse a store whose schema this engine did not write the newest part of."""
    found = current_revisions(store.engine)
    if found != {schema_head()}:
        raise StoreUnavailable(
            f"gc: the store's schema is {sorted(found)}, not this engine's {schema_head()} "
            "(a newer engine wrote it?); gc removes nothing"
        )


def _figures(kinds: dict[str, tuple[int, int, int]]) -> list[KindFigures]:
    return [
        KindFigures(kind=k, removed=n, logical_bytes=lb, stored_bytes=sb)
        for k in RETAINED_KINDS
        for n, lb, sb in [kinds.get(k, (0, 0, 0))]
    ]


def _planned(marked: Marked, blobs: Candidates) -> dict[str, tuple[int, int, int]]:
    out = {k: (len(c.ids), c.logical_bytes, c.stored_bytes) for k, c in marked.kinds.items()}
    out["blobs"] = (len(blobs.ids), blobs.logical_bytes, blobs.stored_bytes)
    return out


def _tally(removed: list[Removed]) -> dict[str, tuple[int, int, int]]:
    out: dict[str, tuple[int, int, int]] = {}
    for item in removed:
        n, lb, sb = out.get(item.kind, (0, 0, 0))
        out[item.kind] = (n + len(item.ids), lb + item.logical_bytes, sb + item.stored_bytes)
    return out


def collect_garbage(
    store: Store,
    retention: Retention | None,
    *,
    holder: str,
    dry_run: bool = False,
    now: datetime | None = None,
) -> GcReport:
    """Remove (with ``dry_run``: count) every object past its retention that no floor
    reaches, in batches that each record a tombstone; ``now`` defaults to the clock.

    Raises PolicyError when the policy file has no retention, StoreUnavailable when a
    newer engine wrote the store's schema, GcLocked naming the holder when another gc
    runs. Each refusal removes nothing.
    """
    if retention is None:
        raise PolicyError(
            "retention: the policy file has no retention section (schema 3); "
            "gc removes nothing without one"
        )
    _require_current_schema(store)
    digest = retention_digest(retention)
    with gc_lock(store, holder):
        moment = now or datetime.now(UTC)
        with store.reading() as conn:
            roots = floor_roots(conn)
            marked = mark_rows(conn, retention, roots, moment)
            if dry_run:
                gone = frozenset(marked.of("snapshots").ids)
                blobs = mark_blobs(conn, retention, roots, moment, excluding=gone)
                floor = event_floor(conn)
        if dry_run:
            return GcReport(
                dry_run=True,
                policy_digest=digest,
                grace_minutes=retention.grace_minutes,
                kinds=_figures(_planned(marked, blobs)),
                batches=0,
                event_floor=floor,
            )
        sweeper = Sweeper(store, holder, digest, retention.batch_rows)
        removed = _sweep(sweeper, store, retention, marked, moment)
        with store.reading() as conn:
            floor = event_floor(conn)
        swept = sweep_stale_run_dirs()
    return GcReport(
        dry_run=False,
        policy_digest=digest,
        grace_minutes=retention.grace_minutes,
        kinds=_figures(_tally(removed)),
        batches=sweeper.batches,
        event_floor=floor,
        run_dirs_swept=swept,
    )


def _sweep(
    sweeper: Sweeper, store: Store, retention: Retention, marked: Marked, moment: datetime
) -> list[Removed]:
    """Receipts and runs first, then what they alone named; blobs are marked again from
    the snapshots that are left."""
    receipts, runs = marked.of("receipts"), marked.of("runs")
    with_receipt = set(receipts.ids)
    ids = receipts.ids + [r for r in runs.ids if r not in with_receipt]
    removed = sweeper.sweep(ids, delete_receipts(receipts, runs))
    removed += sweeper.sweep(marked.of("envelopes").ids, delete_envelopes(marked.of("envelopes")))
    removed += sweeper.sweep(marked.of("plans").ids, delete_plans(marked.of("plans")))
    snapshots = marked.of("snapshots")
    removed += sweeper.sweep(snapshots.ids, delete_snapshots(snapshots))
    with store.reading() as conn:
        roots = floor_roots(conn)
        blobs = mark_blobs(conn, retention, roots, moment)
    cut_ms = blobs_cutoff_ms(retention, moment)
    removed += sweeper.sweep(blobs.ids, delete_blobs(blobs, cut_ms))
    removed += sweeper.sweep(marked.of("events").ids, delete_events(marked.of("events")))
    return removed


def blobs_cutoff_ms(retention: Retention, moment: datetime) -> int:
    """The touch time before which an unreferenced blob may go (0 when kept forever)."""
    cut = cutoff(moment, retention, "blobs")
    return 0 if cut is None else to_ms(cut)
