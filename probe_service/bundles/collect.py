"""``bundle_export``: gather what a selection needs from the store, as bundle members.

docs/ARCHITECTURE.md, "Bundles": a selection is a snapshot (its plans, their receipts and
the claims made on it), claims by id, or a scope (every claim recorded in it). A claim
brings its supersession chain, its snapshot, the receipts and plans its evidence names,
its tombstone, and its history (checks, obligations with their resolutions, audit
entries); every snapshot brings its manifest and blobs; a receipt brings its DSSE
envelope when it was signed. Every object is read as it is stored, byte for byte.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, select

from ..canonical import canonical_json, sha256_hex
from ..claims.audit import audit_entry
from ..claims.lineage import _chain
from ..claims.records import ClaimRecord
from ..claims.resolutions import list_in
from ..claims.rows import chunks, load_claims
from ..claims.tables import (
    claim_audit,
    claim_checks,
    claim_supersessions,
    claim_tombstones,
    claims,
)
from ..errors import InvalidInput, NotFound
from ..plans.tables import plans, receipt_signatures, receipts
from ..queue.listing import plan_keys
from ..snapshot.blobs import decompress_blob, fetch_compressed
from ..snapshot.manifest import decode_manifest
from ..store import Store
from ..store.schema import snapshots
from .format import member_path

__all__ = ["Selection", "claim_body", "collect_members"]

#: What a claim member holds: the record as created; links live in their own members.
_LINKS = {"supersedes", "superseded_by", "withdrawn"}


@dataclass(frozen=True)
class Selection:
    """Exactly one of: a snapshot, claim ids, a scope."""

    snapshot_id: str | None = None
    claim_ids: tuple[str, ...] = ()
    scope: str | None = None

    def described(self) -> dict[str, Any]:
        """The selection as the manifest header records it."""
        return {
            "snapshot_id": self.snapshot_id,
            "claims": list(self.claim_ids),
            "scope": self.scope,
        }


@dataclass
class _Gathered:
    snapshots: set[str] = field(default_factory=set)
    plans: set[str] = field(default_factory=set)
    receipt_shas: set[str] = field(default_factory=set)
    claims: dict[str, ClaimRecord] = field(default_factory=dict)


def claim_body(record: ClaimRecord) -> bytes:
    """A claim member's bytes: the record without its links, canonical JSON."""
    return canonical_json(record.model_dump(mode="json", exclude=_LINKS))


def collect_members(store: Store, selection: Selection) -> list[tuple[str, bytes]]:
    """Every member the selection needs, in the bundle's kind order.

    Raises InvalidInput when the selection names none or several of its forms or selects
    nothing, NotFound when a snapshot it needs is not stored (or a blob of one).
    """
    forms = [
        selection.snapshot_id is not None,
        bool(selection.claim_ids),
        selection.scope is not None,
    ]
    if sum(forms) != 1:
        raise InvalidInput("selection: name exactly one of snapshot_id, claim_ids, scope")
    with store.reading() as conn:
        found = _Gathered()
        if selection.snapshot_id is not None:
            _from_snapshot(conn, selection.snapshot_id, found)
        ids = list(selection.claim_ids) or _claims_of(conn, selection)
        _claim_closure(conn, ids, found)
        if not (found.snapshots or found.claims):
            raise InvalidInput(f"scope: no claim recorded in scope {selection.scope!r}")
        return _members(conn, found)


def _from_snapshot(conn: Connection, snapshot_id: str, found: _Gathered) -> None:
    found.snapshots.add(snapshot_id)
    # A plan's snapshot is inside its body; a trigger keeps it in plan_keys, indexed.
    keys = plan_keys.c
    found.plans.update(
        conn.execute(select(keys.plan_id).where(keys.snapshot_id == snapshot_id)).scalars()
    )
    for part in chunks(sorted(found.plans)):
        found.receipt_shas.update(
            conn.execute(
                select(receipts.c.receipt_sha256).where(receipts.c.plan_id.in_(part))
            ).scalars()
        )


def _claims_of(conn: Connection, selection: Selection) -> list[str]:
    c = claims.c
    if selection.snapshot_id is not None:
        where = c.snapshot_id == selection.snapshot_id
    else:
        where = c.scope == selection.scope
    return list(conn.execute(select(c.claim_id).where(where).order_by(c.created_at)).scalars())


def _claim_closure(conn: Connection, ids: Sequence[str], found: _Gathered) -> None:
    pending = list(ids)
    seen: set[str] = set()
    while pending:
        batch = [i for i in dict.fromkeys(pending) if i not in seen]
        pending = []
        seen.update(batch)
        loaded = load_claims(conn, batch)
        missing = [i for i in batch if i not in loaded]
        if missing:
            raise NotFound(f"claim_ids: no claim {missing[0]!r}")
        for record in loaded.values():
            found.claims[record.claim_id] = record
            pending.extend(_chain(conn, record.claim_id))
            found.snapshots.add(record.snapshot_id)
            for ev in record.evidence:
                if ev.receipt is not None:
                    found.receipt_shas.add(ev.receipt)
                if ev.plan is not None:
                    found.plans.add(ev.plan)


def _members(conn: Connection, found: _Gathered) -> list[tuple[str, bytes]]:
    receipt_rows = _receipt_rows(conn, found)
    out: list[tuple[str, bytes]] = []
    manifests: list[tuple[str, bytes]] = []
    blob_sizes: dict[str, int] = {}
    for snapshot_id in sorted(found.snapshots):
        row = conn.execute(
            select(snapshots.c.manifest).where(snapshots.c.snapshot_id == snapshot_id)
        ).first()
        if row is None:
            raise NotFound(f"snapshot {snapshot_id}: not stored")
        snap = decode_manifest(snapshot_id, row.manifest)
        for entry in snap.entries:
            if entry.kind == "file" and entry.digest is not None:
                blob_sizes[entry.digest] = entry.size
        manifests.append(
            (member_path("snapshot", snapshot_id), decompress_blob(snapshot_id, row.manifest))
        )
    for digest, data in fetch_compressed(conn, blob_sizes):
        out.append((member_path("blob", digest), decompress_blob(digest, data, blob_sizes[digest])))
    out.sort()
    out.extend(manifests)
    for part in chunks(sorted(found.plans)):
        for plan_id, body in conn.execute(
            select(plans.c.plan_id, plans.c.body)
            .where(plans.c.plan_id.in_(part))
            .order_by(plans.c.plan_id)
        ):
            out.append((member_path("plan", plan_id), body.encode("utf-8")))
    for run_id, body, _ in receipt_rows:
        out.append((member_path("receipt", run_id), body.encode("utf-8")))
    for run_id, _, envelope in receipt_rows:
        if envelope is not None:
            out.append((member_path("envelope", run_id), envelope.encode("utf-8")))
    out.extend(_claim_members(conn, found.claims))
    return out


def _receipt_rows(conn: Connection, found: _Gathered) -> list[tuple[str, str, str | None]]:
    """``(run_id, body, envelope)`` of every receipt row with a selected sha; their plans
    and snapshots join the selection."""
    rows: list[tuple[str, str, str | None]] = []
    for part in chunks(sorted(found.receipt_shas)):
        query = (
            select(
                receipts.c.run_id,
                receipts.c.body,
                receipts.c.plan_id,
                receipt_signatures.c.envelope,
            )
            .join(
                receipt_signatures, receipt_signatures.c.run_id == receipts.c.run_id, isouter=True
            )
            .where(receipts.c.receipt_sha256.in_(part))
            .order_by(receipts.c.run_id)
        )
        for run_id, body, plan_id, envelope in conn.execute(query):
            rows.append((run_id, body, envelope))
            found.plans.add(plan_id)
            found.snapshots.add(json.loads(body)["committed"]["snapshot_id"])
    for part in chunks(sorted(found.plans)):
        for body in conn.execute(select(plans.c.body).where(plans.c.plan_id.in_(part))).scalars():
            found.snapshots.add(json.loads(body)["snapshot_id"])
    return rows


def _claim_members(conn: Connection, records: dict[str, ClaimRecord]) -> list[tuple[str, bytes]]:
    ids = sorted(records)
    out = [(member_path("claim", i), claim_body(records[i])) for i in ids]
    sup, tomb = claim_supersessions.c, claim_tombstones.c
    for part in chunks(ids):
        for row in conn.execute(select(claim_supersessions).where(sup.predecessor_id.in_(part))):
            if row.successor_id in records:
                out.append((member_path("supersession", row.predecessor_id), _row_body(row)))
    for part in chunks(ids):
        for row in conn.execute(select(claim_tombstones).where(tomb.claim_id.in_(part))):
            out.append((member_path("tombstone", row.claim_id), _row_body(row)))
    out.extend(_history_members(conn, ids))
    return out


def _history_members(conn: Connection, ids: Sequence[str]) -> list[tuple[str, bytes]]:
    records: list[tuple[str, dict[str, Any]]] = []
    for part in chunks(list(ids)):
        for row in conn.execute(
            select(claim_checks)
            .where(claim_checks.c.claim_id.in_(part))
            .order_by(claim_checks.c.check_id)
        ):
            check = {k: v for k, v in row._mapping.items() if k != "check_id"}
            records.append(("check", {**check, "reasons": json.loads(check["reasons"])}))
    for claim_id in ids:
        for obligation in list_in(conn, claim_id=claim_id, limit=1_000_000):
            records.append(("obligation", obligation.model_dump(mode="json")))
        for row in conn.execute(
            select(claim_audit)
            .where(claim_audit.c.subject_ids.contains(json.dumps(claim_id)))
            .order_by(claim_audit.c.audit_id)
        ):
            entry = audit_entry(row).model_dump(mode="json")
            records.append(("audit", {**entry, "claim_id": claim_id}))
    return _record_members(records)


def _record_members(records: Iterable[tuple[str, dict[str, Any]]]) -> list[tuple[str, bytes]]:
    out: dict[str, bytes] = {}
    for kind, record in records:
        body = canonical_json(record)
        out.setdefault(member_path(kind, sha256_hex(body)), body)
    return list(out.items())


def _row_body(row: Any) -> bytes:
    return canonical_json(dict(row._mapping))
