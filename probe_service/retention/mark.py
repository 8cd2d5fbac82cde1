"""What ``gc`` would remove: every object past its retention that no root reaches.

docs/ARCHITECTURE.md, "Retention and gc". The mark reads the store once; the sweep
re-checks each reference inside the statement that deletes, so an object a writer
referenced after the mark stays. Blobs are marked after the snapshots are swept, from the
manifests that are then still stored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Row, text

from ..policies.retention import Retention
from ..snapshot.manifest import decode_manifest
from ..store.events import publish_events
from .roots import Roots

__all__ = ["Candidates", "Marked", "cutoff", "mark_blobs", "mark_rows", "to_ms"]


@dataclass
class Candidates:
    """The objects of one kind gc would remove, with their sizes."""

    ids: list[str] = field(default_factory=list)
    logical_bytes: int = 0
    stored_bytes: int = 0
    #: Each id's (logical, stored) bytes, so a batch reports exactly what it removed.
    sizes: dict[str, tuple[int, int]] = field(default_factory=dict)

    def add(self, ident: str, logical: int, stored: int) -> None:
        self.ids.append(ident)
        self.sizes[ident] = (int(logical or 0), int(stored or 0))
        self.logical_bytes += self.sizes[ident][0]
        self.stored_bytes += self.sizes[ident][1]


@dataclass
class Marked:
    """Candidates per kind; ``receipts`` and ``runs`` are keyed by run id, ``envelopes``
    (signatures of receipts that stay) by run id, ``events`` by cursor."""

    kinds: dict[str, Candidates] = field(default_factory=dict)

    def of(self, kind: str) -> Candidates:
        return self.kinds.setdefault(kind, Candidates())


def _stored(conn: Connection, column: str) -> str:
    # PostgreSQL's on-disk size of the value (TOAST compresses); SQLite stores it as is.
    return f"pg_column_size({column})" if conn.dialect.name == "postgresql" else f"length({column})"


def cutoff(now: datetime, retention: Retention, kind: str) -> datetime | None:
    """Objects of ``kind`` older than this may go; None when the kind is kept forever."""
    days = retention.days(kind)
    if days is None:
        return None
    return now - max(timedelta(days=days), timedelta(minutes=retention.grace_minutes))


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="microseconds")


def to_ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def mark_rows(conn: Connection, retention: Retention, roots: Roots, now: datetime) -> Marked:
    """Candidates of every kind but blobs, given the floors' ``roots``."""
    marked = Marked()
    runs_cut = cutoff(now, retention, "runs")
    receipts_cut = cutoff(now, retention, "receipts")
    runs = {
        r.run_id: r
        for r in conn.execute(
            text("SELECT run_id, state, finished_ms, receipt_sha256, action_key, plan_id FROM runs")
        )
    }
    receipts = {
        r.run_id: r
        for r in conn.execute(
            text(
                "SELECT run_id, receipt_sha256, plan_id, action_key, created_at, "  # noqa: S608
                f"length(body) AS logical, {_stored(conn, 'body')} AS stored FROM receipts"
            )
        )
    }
    kept_runs = set(roots.runs) | {
        run_id
        for run_id, r in runs.items()
        if runs_cut is None
        or r.state != "done"
        or r.finished_ms is None
        or r.finished_ms >= to_ms(runs_cut)
    }
    kept = {
        run_id
        for run_id, r in receipts.items()
        if receipts_cut is None
        or r.created_at >= _iso(receipts_cut)
        or r.receipt_sha256 in roots.receipt_shas
    }
    newest: dict[str, tuple[str, str]] = {}
    for run_id, r in receipts.items():
        if r.action_key not in newest or r.created_at > newest[r.action_key][0]:
            newest[r.action_key] = (r.created_at, run_id)
    in_use_shas: set[str] = set()
    while True:
        size = (len(kept), len(kept_runs))
        shas = {runs[k].receipt_sha256 for k in kept_runs if k in runs} | roots.receipt_shas
        keys = {runs[k].action_key for k in kept_runs if k in runs}
        in_use = {newest[key][1] for key in keys if key in newest}
        in_use_shas = {receipts[r].receipt_sha256 for r in in_use}
        kept |= {run_id for run_id in receipts if run_id in kept_runs}
        kept |= {run_id for run_id, r in receipts.items() if r.receipt_sha256 in shas}
        kept |= in_use
        kept_runs |= {run_id for run_id in kept if run_id in runs}
        if (len(kept), len(kept_runs)) == size:
            break
    for run_id, r in receipts.items():
        if run_id not in kept:
            marked.of("receipts").add(run_id, r.logical, r.stored)
    for run_id in runs:
        if run_id not in kept_runs:
            marked.of("runs").add(run_id, 0, 0)
    _mark_envelopes(conn, retention, now, marked, kept, roots.receipt_shas | in_use_shas, receipts)
    kept_plans = _mark_plans(conn, retention, now, marked, roots, kept_runs, kept, runs, receipts)
    _mark_snapshots(conn, retention, now, marked, roots, kept_plans, kept)
    _mark_events(conn, retention, now, marked)
    return marked


def _mark_envelopes(
    conn: Connection,
    retention: Retention,
    now: datetime,
    marked: Marked,
    kept_receipts: set[str],
    protected_shas: set[str],
    receipts: dict[str, Row[Any]],
) -> None:
    cut = cutoff(now, retention, "envelopes")
    rows = conn.execute(
        text(
            "SELECT run_id, receipt_sha256, created_at, length(envelope) AS logical, "  # noqa: S608
            f"{_stored(conn, 'envelope')} AS stored FROM receipt_signatures"
        )
    )
    for r in rows:
        if r.run_id not in kept_receipts:
            continue  # removed with its receipt, counted there
        if cut is not None and r.created_at < _iso(cut) and r.receipt_sha256 not in protected_shas:
            marked.of("envelopes").add(r.run_id, r.logical, r.stored)


def _mark_plans(
    conn: Connection,
    retention: Retention,
    now: datetime,
    marked: Marked,
    roots: Roots,
    kept_runs: set[str],
    kept_receipts: set[str],
    runs: dict[str, Row[Any]],
    receipts: dict[str, Row[Any]],
) -> set[str]:
    cut = cutoff(now, retention, "plans")
    used = set(roots.plans)
    used |= {runs[k].plan_id for k in kept_runs if k in runs}
    used |= {receipts[k].plan_id for k in kept_receipts}
    kept: set[str] = set()
    rows = conn.execute(
        text(
            "SELECT plan_id, created_at, length(body) AS logical, "  # noqa: S608
            f"{_stored(conn, 'body')} AS stored FROM plans"
        )
    )
    for r in rows:
        if cut is None or r.created_at >= _iso(cut) or r.plan_id in used:
            kept.add(r.plan_id)
        else:
            marked.of("plans").add(r.plan_id, r.logical, r.stored)
    return kept


def _mark_snapshots(
    conn: Connection,
    retention: Retention,
    now: datetime,
    marked: Marked,
    roots: Roots,
    kept_plans: set[str],
    kept_receipts: set[str],
) -> None:
    cut = cutoff(now, retention, "snapshots")
    if cut is None:
        return
    used = set(roots.snapshots)
    for plan_id, snapshot_id in conn.execute(text("SELECT plan_id, snapshot_id FROM plan_keys")):
        if plan_id in kept_plans:
            used.add(snapshot_id)
    for run_id, snapshot_id in conn.execute(text("SELECT run_id, snapshot_id FROM inprocess_runs")):
        if run_id in kept_receipts:
            used.add(snapshot_id)
    rows = conn.execute(
        text(
            "SELECT snapshot_id, created_at, length(manifest) AS logical, "  # noqa: S608
            f"{_stored(conn, 'manifest')} AS stored FROM snapshots WHERE created_at < :cut"
        ),
        {"cut": _iso(cut)},
    )
    for r in rows:
        if r.snapshot_id not in used:
            marked.of("snapshots").add(r.snapshot_id, r.logical, r.stored)


def _mark_events(conn: Connection, retention: Retention, now: datetime, marked: Marked) -> None:
    """Events below every registered consumer's cursor and past their retention; the
    newest event always stays (PostgreSQL numbers the next one after it)."""
    cut = cutoff(now, retention, "events")
    if cut is None:
        return
    publish_events(conn)  # PostgreSQL's outbox: numbered events only
    lowest = conn.execute(text("SELECT min(cursor) FROM event_consumers")).scalar()
    newest = conn.execute(text("SELECT max(cursor) FROM events")).scalar() or 0
    limit = newest - 1 if lowest is None else min(int(lowest), newest - 1)
    rows = conn.execute(
        text(
            "SELECT cursor, created_at, length(payload) AS logical, "  # noqa: S608
            f"{_stored(conn, 'payload')} AS stored FROM events "
            "WHERE cursor <= :limit ORDER BY cursor"
        ),
        {"limit": limit},
    )
    for r in rows:
        # Contiguous from the oldest: the floor a reader is told about means "every
        # event at or below it is gone", so the first young event ends the run.
        if r.created_at >= _iso(cut):
            break
        marked.of("events").add(str(r.cursor), r.logical, r.stored)


def mark_blobs(
    conn: Connection,
    retention: Retention,
    roots: Roots,
    now: datetime,
    excluding: frozenset[str] = frozenset(),
) -> Candidates:
    """Blobs no stored snapshot (but those ``excluding`` names: a dry run's candidates),
    receipt case list or capture cache names, untouched since their retention (a blob
    touched by a capture in progress is young)."""
    found = Candidates()
    cut = cutoff(now, retention, "blobs")
    if cut is None:
        return found
    used = set(roots.blobs)
    for snapshot_id, manifest in conn.execute(text("SELECT snapshot_id, manifest FROM snapshots")):
        if snapshot_id in excluding:
            continue
        used |= {
            e.digest
            for e in decode_manifest(str(snapshot_id), bytes(manifest)).entries
            if e.digest is not None
        }
    for (body,) in conn.execute(text("SELECT body FROM receipts WHERE body LIKE '%cases_sha256%'")):
        junit = (json.loads(body).get("committed") or {}).get("junit") or {}
        if isinstance(junit, dict) and isinstance(junit.get("cases_sha256"), str):
            used.add(junit["cases_sha256"])
    rows = conn.execute(
        text(
            "SELECT digest, size, "  # noqa: S608
            f"{_stored(conn, 'data')} AS stored FROM blobs "
            "WHERE touched_ms IS NULL OR touched_ms < :cut"
        ),
        {"cut": to_ms(cut)},
    )
    for r in rows:
        if r.digest not in used:
            found.add(r.digest, r.size, r.stored)
    return found
