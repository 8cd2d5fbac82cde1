"""The one audited deletion path: bounded batches, each one transaction that removes
and records its tombstone (docs/ARCHITECTURE.md, "Retention and gc").

A batch inserts a ``gc_token`` row first (the append-only triggers let a DELETE through
only while one is visible, so only inside this transaction), deletes what still has no
reference (each statement re-checks the references a writer may have added since the
mark), writes one tombstone row per kind it removed and deletes its token. A process
killed anywhere in a batch rolls the whole batch back: no half-removed object, and the
token never commits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, bindparam, text

from ..canonical import sha256_of_json
from ..store import Store
from ..store.events import utc_now
from .mark import Candidates

__all__ = ["Removed", "Sweeper"]


@dataclass(frozen=True)
class Removed:
    """What one batch removed of one kind."""

    kind: str
    ids: tuple[str, ...]
    logical_bytes: int
    stored_bytes: int
    floor: int | None = None


#: Deletes one batch of ids inside the caller's transaction; returns what it removed.
BatchDelete = Callable[[Connection, list[str]], list[Removed]]


def _select(conn: Connection, sql: str, ids: Sequence[str], **params: object) -> list[str]:
    if not ids:
        return []
    stmt = text(sql).bindparams(bindparam("ids", expanding=True))
    return [str(v) for v in conn.execute(stmt, {"ids": list(ids), **params}).scalars()]


def _lock(conn: Connection, table: str, column: str, ids: Sequence[str]) -> None:
    """Lock the batch's rows before its references are re-checked (PostgreSQL): a writer
    holding one (``store.referents``) commits first, and the re-check then sees its
    reference; SQLite runs one write transaction at a time."""
    if conn.dialect.name == "postgresql" and ids:
        _select(conn, f"SELECT {column} FROM {table} WHERE {column} IN :ids FOR UPDATE", ids)  # noqa: S608


def _delete(conn: Connection, table: str, column: str, ids: Sequence[str]) -> None:
    if ids:
        stmt = text(f"DELETE FROM {table} WHERE {column} IN :ids")  # noqa: S608
        conn.execute(stmt.bindparams(bindparam("ids", expanding=True)), {"ids": list(ids)})


def _sizes(candidates: Candidates, ids: Sequence[str]) -> tuple[int, int]:
    """Logical and stored bytes of ``ids`` as the mark measured them: the sweep does not
    read the values it removes."""
    found = [candidates.sizes.get(i, (0, 0)) for i in ids]
    return sum(f[0] for f in found), sum(f[1] for f in found)


class Sweeper:
    """Runs batches for one gc, naming its holder and its retention in each tombstone."""

    def __init__(self, store: Store, holder: str, policy_digest: str, batch_rows: int) -> None:
        self.store = store
        self.holder = holder
        self.policy_digest = policy_digest
        self.batch_rows = batch_rows
        #: Batches committed so far.
        self.batches = 0

    def sweep(self, ids: Sequence[str], delete: BatchDelete) -> list[Removed]:
        """Remove ``ids`` in batches of ``batch_rows``, one transaction each."""
        done: list[Removed] = []
        for start in range(0, len(ids), self.batch_rows):
            batch = list(ids[start : start + self.batch_rows])
            with self.store.transaction() as conn:
                conn.execute(text("INSERT INTO gc_token (holder) VALUES (:h)"), {"h": self.holder})
                removed = delete(conn, batch)
                for item in removed:
                    if item.ids:
                        self._tombstone(conn, item)
                conn.execute(text("DELETE FROM gc_token"))
            self.batches += 1
            done.extend(removed)
        return done

    def _tombstone(self, conn: Connection, item: Removed) -> None:
        conn.execute(
            text(
                "INSERT INTO gc_tombstones (at, kind, removed, logical_bytes, stored_bytes, "
                "ids_sha256, policy_digest, ran_by, floor) VALUES (:at, :kind, :removed, "
                ":logical, :stored, :ids, :policy, :by, :floor)"
            ),
            {
                "at": utc_now(),
                "kind": item.kind,
                "removed": len(item.ids),
                "logical": item.logical_bytes,
                "stored": item.stored_bytes,
                "ids": sha256_of_json(sorted(item.ids)),
                "policy": self.policy_digest,
                "by": self.holder,
                "floor": item.floor,
            },
        )


def delete_receipts(receipts: Candidates, runs: Candidates) -> BatchDelete:
    """Receipts (keyed by run) with their envelopes and in-process rows, and their runs:
    a receipt goes only while no claim names it and no run outside the batch (one that
    reused it since the mark) does."""

    run_ids = set(runs.ids)

    def delete(conn: Connection, batch: list[str]) -> list[Removed]:
        _lock(conn, "receipts", "run_id", batch)
        shas: dict[str, str] = dict(
            conn.execute(
                text("SELECT run_id, receipt_sha256 FROM receipts WHERE run_id IN :ids").bindparams(
                    bindparam("ids", expanding=True)
                ),
                {"ids": batch},
            ).all()
        )
        # Two scans per batch, not a correlated one per receipt (runs.receipt_sha256 has
        # no index, and writers should not pay for one).
        wanted = sorted(set(shas.values()))
        cited = set(
            _select(conn, "SELECT receipt FROM claim_evidence WHERE receipt IN :ids", wanted)
        )
        in_batch = set(batch)
        stmt = text("SELECT run_id, receipt_sha256 FROM runs WHERE receipt_sha256 IN :ids")
        reused = {
            sha
            for run_id, sha in conn.execute(
                stmt.bindparams(bindparam("ids", expanding=True)), {"ids": wanted or [""]}
            ).all()
            if run_id not in in_batch
        }
        ok = [run_id for run_id, sha in shas.items() if sha not in cited and sha not in reused]
        envelopes = _select(conn, "SELECT run_id FROM receipt_signatures WHERE run_id IN :ids", ok)
        for table in ("receipt_signatures", "inprocess_runs", "receipts"):
            _delete(conn, table, "run_id", ok)
        gone_runs = _select(
            conn,
            "SELECT run_id FROM runs WHERE run_id IN :ids AND state = 'done' AND NOT EXISTS "
            "(SELECT 1 FROM receipts WHERE receipts.run_id = runs.run_id) AND NOT EXISTS "
            "(SELECT 1 FROM pending_confirmations p WHERE p.run_id = runs.run_id)",
            [b for b in batch if b in run_ids],
        )
        _delete(conn, "runs", "run_id", gone_runs)
        return [
            Removed("receipts", tuple(ok), *_sizes(receipts, ok)),
            Removed("envelopes", tuple(envelopes), 0, 0),
            Removed("runs", tuple(gone_runs), 0, 0),
        ]

    return delete


def delete_envelopes(envelopes: Candidates) -> BatchDelete:
    """Signatures of old receipts that stay, while no claim names the receipt."""

    def delete(conn: Connection, batch: list[str]) -> list[Removed]:
        ok = _select(
            conn,
            "SELECT run_id FROM receipt_signatures s WHERE run_id IN :ids AND NOT EXISTS "
            "(SELECT 1 FROM claim_evidence ce WHERE ce.receipt = s.receipt_sha256)",
            batch,
        )
        _delete(conn, "receipt_signatures", "run_id", ok)
        return [Removed("envelopes", tuple(ok), *_sizes(envelopes, ok))]

    return delete


def delete_plans(plans: Candidates) -> BatchDelete:
    """Plans no run, receipt, claim or recheck names (re-checked here)."""

    def delete(conn: Connection, batch: list[str]) -> list[Removed]:
        _lock(conn, "plans", "plan_id", batch)
        ok = _select(
            conn,
            "SELECT plan_id FROM plans p WHERE plan_id IN :ids "
            "AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.plan_id = p.plan_id) "
            "AND NOT EXISTS (SELECT 1 FROM receipts r WHERE r.plan_id = p.plan_id) "
            "AND NOT EXISTS (SELECT 1 FROM claim_evidence ce WHERE ce.plan_id = p.plan_id) "
            "AND NOT EXISTS (SELECT 1 FROM recheck_items ri WHERE ri.plan_id = p.plan_id)",
            batch,
        )
        _delete(conn, "plan_keys", "plan_id", ok)
        _delete(conn, "plans", "plan_id", ok)
        return [Removed("plans", tuple(ok), *_sizes(plans, ok))]

    return delete


def delete_snapshots(snapshots: Candidates) -> BatchDelete:
    """Snapshots no plan, receipt, claim, obligation or turn names (re-checked here)."""

    def delete(conn: Connection, batch: list[str]) -> list[Removed]:
        open_ = (
            "x.obligation_id NOT IN (SELECT obligation_id FROM obligation_resolutions) OR "
            "x.obligation_id IN (SELECT obligation_id FROM review_requests WHERE review_id "
            "NOT IN (SELECT review_id FROM review_decisions))"
        )
        live = "x.claim_id NOT IN (SELECT claim_id FROM claim_tombstones)"
        # The floors of roots.py, re-read: what a writer committed since the mark holds.
        named = " ".join(
            "AND NOT EXISTS (SELECT 1 FROM "  # noqa: S608 - constants of this module only
            f"{table} x WHERE x.{column} = s.snapshot_id AND ({where}))"
            for table, column, where in (
                ("plan_keys", "snapshot_id", "1 = 1"),
                ("inprocess_runs", "snapshot_id", "1 = 1"),
                ("claims", "snapshot_id", live),
                ("obligations", "snapshot_id", open_),
                ("obligations", "from_snapshot_id", open_),
                ("turns", "snapshot_id", "1 = 1"),
                ("turn_blocks", "snapshot_id", "1 = 1"),
                ("turn_answers", "end_snapshot_id", "1 = 1"),
            )
        )
        _lock(conn, "snapshots", "snapshot_id", batch)
        ok = _select(
            conn,
            f"SELECT snapshot_id FROM snapshots s WHERE snapshot_id IN :ids {named}",  # noqa: S608
            batch,
        )
        _delete(conn, "snapshots", "snapshot_id", ok)
        return [Removed("snapshots", tuple(ok), *_sizes(snapshots, ok))]

    return delete


def delete_blobs(blobs: Candidates, touched_before_ms: int) -> BatchDelete:
    """Blobs still untouched since the mark's cutoff: a capture that stored one again
    since (deduplicating against it) made it young, and it stays."""

    def delete(conn: Connection, batch: list[str]) -> list[Removed]:
        stmt = text(
            "DELETE FROM blobs WHERE digest IN :ids AND (touched_ms IS NULL OR touched_ms < :cut)"
        ).bindparams(bindparam("ids", expanding=True))
        conn.execute(stmt, {"ids": batch, "cut": touched_before_ms})
        ok = set(batch) - set(_select(conn, "SELECT digest FROM blobs WHERE digest IN :ids", batch))
        kept = sorted(ok)
        return [Removed("blobs", tuple(kept), *_sizes(blobs, kept))]

    return delete


def delete_events(events: Candidates) -> BatchDelete:
    """Events at or below the lowest registered consumer's cursor (re-read here: a
    consumer registered since the mark holds them), never the newest."""

    def delete(conn: Connection, batch: list[str]) -> list[Removed]:
        lowest = conn.execute(text("SELECT min(cursor) FROM event_consumers")).scalar()
        newest = int(conn.execute(text("SELECT max(cursor) FROM events")).scalar() or 0)
        limit = newest - 1 if lowest is None else min(int(lowest), newest - 1)
        cursors = [int(c) for c in batch if int(c) <= limit]
        if not cursors:
            return []
        # Contiguous from the oldest: the floor says "everything at or below is gone".
        top = max(cursors)
        stmt = text("DELETE FROM events WHERE cursor <= :top")
        conn.execute(stmt, {"top": top})
        ids = tuple(str(c) for c in cursors)
        return [Removed("events", ids, *_sizes(events, ids), floor=top)]

    return delete
