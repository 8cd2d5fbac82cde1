"""``bundle_import``: write a verified bundle into the store in one transaction.

docs/ARCHITECTURE.md, "Bundles": nothing is written before the whole bundle verified
(``verify.py``); then one transaction compares every object the store already holds under
the same id with the bundle's bytes (a difference is a Conflict naming it, and the
transaction writes nothing), inserts only what is new, and marks every created object with
the bundle it came from. Importing the same bundle again writes nothing at all. Imported
receipts are never reusable here, and the history a bundle carries (checks, obligations and
resolutions, audit entries) goes to ``imported_records``, never into this store's own
obligations: an imported resolution closes nothing here.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import zstandard
from pydantic import BaseModel, ConfigDict
from sqlalchemy import Column, Connection, Table, insert, select

from ..claims.rows import chunks, insert_claim, load_claims
from ..claims.tables import claim_supersessions, claim_tombstones
from ..errors import Conflict
from ..plans.tables import plans, receipt_signatures, receipts
from ..store import Store, append_event, utc_now
from ..store.origins import bundle_imports, bundle_origins, imported_from, imported_records
from ..store.schema import blobs, snapshots
from .collect import claim_body
from .verify import VerifiedBundle

__all__ = ["ImportResult", "import_bundle"]


class ImportResult(BaseModel):
    """What an import wrote: per kind, objects new to this store and objects it already
    held byte for byte; ``written`` is false when it held everything."""

    model_config = ConfigDict(frozen=True)

    bundle_id: str
    written: bool
    created: dict[str, int]
    already_stored: dict[str, int]
    signers: tuple[str, ...]
    allow_unsigned: bool
    unsigned_receipts: tuple[str, ...]


@dataclass
class _Plan:
    """What the transaction inserts, by kind."""

    rows: dict[str, list[Any]] = field(default_factory=dict)
    existing: dict[str, int] = field(default_factory=dict)

    def new(self, kind: str, item: Any) -> None:
        self.rows.setdefault(kind, []).append(item)

    def held(self, kind: str) -> None:
        self.existing[kind] = self.existing.get(kind, 0) + 1


def import_bundle(
    store: Store,
    bundle: VerifiedBundle,
    *,
    allow_unsigned: bool,
    interface: str,
    imported_by: str | None,
) -> ImportResult:
    """Write ``bundle`` (verified) in one transaction; raises Conflict naming the first
    object the store holds under the same id with other bytes (nothing is written then)."""

    def body(conn: Connection) -> _Plan:
        planned = _compare(conn, bundle)
        if planned.rows:
            _write(conn, bundle, planned, allow_unsigned, interface, imported_by)
        return planned

    planned = store.retrying(body, what=f"import of bundle {bundle.contents.bundle_id}")
    return ImportResult(
        bundle_id=bundle.contents.bundle_id,
        written=bool(planned.rows),
        created={k: len(v) for k, v in planned.rows.items()},
        already_stored=planned.existing,
        signers=tuple(bundle.signers()),
        allow_unsigned=allow_unsigned,
        unsigned_receipts=tuple(bundle.unsigned_receipts()),
    )


def _stored(
    conn: Connection, table: Table, key: Column[Any], ids: Sequence[str], *columns: Column[Any]
) -> dict[str, tuple[Any, ...]]:
    found: dict[str, tuple[Any, ...]] = {}
    for part in chunks(list(ids)):
        for row in conn.execute(select(key, *columns).where(key.in_(part))):
            found[row[0]] = tuple(row[1:])
    return found


def _compare(conn: Connection, bundle: VerifiedBundle) -> _Plan:
    planned = _Plan()

    def sort(
        kind: str, ids: Sequence[str], stored: dict[str, Any], same: Callable[[str], bool]
    ) -> None:
        for ident in ids:
            if ident not in stored:
                planned.new(kind, ident)
            elif same(ident):
                planned.held(kind)
            else:
                raise Conflict(
                    f"{kind}/{ident}: this store holds another object under that id; refused"
                )

    blob_ids = list(bundle.blobs)
    stored_blobs = _stored(conn, blobs, blobs.c.digest, blob_ids, blobs.c.size)
    sort("blob", blob_ids, stored_blobs, lambda d: stored_blobs[d][0] == len(bundle.blobs[d]))
    snap_ids = list(bundle.snapshots)
    sort(
        "snapshot",
        snap_ids,
        _stored(conn, snapshots, snapshots.c.snapshot_id, snap_ids),
        lambda _: True,
    )
    plan_ids = list(bundle.plans)
    stored_plans = _stored(conn, plans, plans.c.plan_id, plan_ids, plans.c.body)
    sort("plan", plan_ids, stored_plans, lambda p: stored_plans[p][0] == bundle.plans[p][1])
    run_ids = list(bundle.receipts)
    stored_receipts = _stored(conn, receipts, receipts.c.run_id, run_ids, receipts.c.body)
    sort(
        "receipt",
        run_ids,
        stored_receipts,
        lambda r: stored_receipts[r][0] == bundle.receipts[r][1],
    )
    env_ids = list(bundle.envelopes)
    sigs = receipt_signatures
    stored_envs = _stored(conn, sigs, sigs.c.run_id, env_ids, sigs.c.envelope)
    sort("envelope", env_ids, stored_envs, lambda r: stored_envs[r][0] == bundle.envelopes[r][0])
    claim_ids = list(bundle.claims)
    stored_claims = load_claims(conn, claim_ids)
    raw = bundle.contents.members
    sort(
        "claim",
        claim_ids,
        stored_claims,
        lambda c: claim_body(stored_claims[c]) == raw[f"claim/{c}"],
    )
    _links(conn, bundle, sort)
    # This store's own claims already hold their history here: none of it is carried in.
    origins = imported_from(conn, "claim", list(stored_claims))
    own = {c for c in stored_claims if c not in origins}
    digests = [d for d, (_, claim_id, _) in bundle.records.items() if claim_id not in own]
    for _ in range(len(bundle.records) - len(digests)):
        planned.held("record")
    stored_records = _stored(conn, imported_records, imported_records.c.digest, digests)
    sort("record", digests, stored_records, lambda _: True)
    return planned


def _links(
    conn: Connection,
    bundle: VerifiedBundle,
    sort: Callable[[str, Sequence[str], dict[str, Any], Callable[[str], bool]], None],
) -> None:
    for kind, table, key, links in (
        ("supersession", claim_supersessions, "predecessor_id", bundle.supersessions),
        ("tombstone", claim_tombstones, "claim_id", bundle.tombstones),
    ):
        query = select(table).where(table.c[key].in_(list(links)))
        rows = {r._mapping[key]: dict(r._mapping) for r in conn.execute(query)}

        def same(ident: str, rows: dict[str, Any] = rows, links: dict[str, Any] = links) -> bool:
            return bool(rows[ident] == links[ident])

        sort(kind, list(links), rows, same)


def _write(
    conn: Connection,
    bundle: VerifiedBundle,
    planned: _Plan,
    allow_unsigned: bool,
    interface: str,
    imported_by: str | None,
) -> None:
    bundle_id = bundle.contents.bundle_id
    header = {k: v for k, v in bundle.contents.manifest.items() if k != "objects"}
    now = utc_now()
    conn.execute(
        insert_ignoring(conn, bundle_imports, "bundle_id"),
        {
            "bundle_id": bundle_id,
            "format_version": header["version"],
            "header": json.dumps(header, sort_keys=True),
            "signers": json.dumps(bundle.signers()),
            "allow_unsigned": int(allow_unsigned),
            "objects": sum(len(v) for v in planned.rows.values()),
            "interface": interface,
            "imported_by": imported_by,
            "imported_at": now,
        },
    )
    new = planned.rows
    compressor = zstandard.ZstdCompressor(level=3)
    _insert(conn, blobs, [
        {"digest": d, "size": len(bundle.blobs[d]), "data": compressor.compress(bundle.blobs[d]),
         "touched_ms": time.time_ns() // 1_000_000}
        for d in new.get("blob", [])
    ])  # fmt: skip
    _insert(conn, snapshots, [_snapshot_row(bundle, s, now) for s in new.get("snapshot", [])])
    _insert(conn, plans, [
        {"plan_id": p, "body": bundle.plans[p][1], "created_at": now} for p in new.get("plan", [])
    ])  # fmt: skip
    local_shas = _local_receipt_shas(conn, bundle, new.get("receipt", []))
    _insert(conn, receipts, [_receipt_row(bundle, r, now) for r in new.get("receipt", [])])
    _insert(conn, receipt_signatures, [
        {"run_id": r, "receipt_sha256": bundle.receipts[r][0].receipt_sha256,
         "keyid": json.loads(bundle.envelopes[r][0])["signatures"][0]["keyid"],
         "envelope": bundle.envelopes[r][0], "created_at": now}
        for r in new.get("envelope", [])
    ])  # fmt: skip
    for claim_id in new.get("claim", []):
        insert_claim(conn, bundle.claims[claim_id])
    _insert(
        conn, claim_supersessions, [bundle.supersessions[i] for i in new.get("supersession", [])]
    )
    _insert(conn, claim_tombstones, [bundle.tombstones[i] for i in new.get("tombstone", [])])
    _insert(conn, imported_records, [
        {"digest": d, "kind": bundle.records[d][0], "claim_id": bundle.records[d][1],
         "bundle_id": bundle_id, "body": bundle.records[d][2]}
        for d in new.get("record", [])
    ])  # fmt: skip
    shas = sorted(
        {bundle.receipts[r][0].receipt_sha256 for r in new.get("receipt", [])} - local_shas
    )
    origins = [("receipt", s) for s in shas] + [
        (kind, ident) for kind in ("snapshot", "plan", "claim") for ident in new.get(kind, [])
    ]
    _insert(
        conn,
        bundle_origins,
        [{"kind": k, "object_id": i, "bundle_id": bundle_id} for k, i in origins],
    )
    append_event(conn, "bundle_imported", bundle_id, {k: len(v) for k, v in new.items()})


def _local_receipt_shas(
    conn: Connection, bundle: VerifiedBundle, run_ids: Sequence[str]
) -> set[str]:
    """Receipt shas this store already holds from a run of its own (not imported)."""
    shas = sorted({bundle.receipts[r][0].receipt_sha256 for r in run_ids})
    found: set[str] = set()
    for part in chunks(shas):
        found.update(
            conn.execute(
                select(receipts.c.receipt_sha256).where(receipts.c.receipt_sha256.in_(part))
            ).scalars()
        )
    return found


def _snapshot_row(bundle: VerifiedBundle, snapshot_id: str, now: str) -> dict[str, Any]:
    snap, manifest = bundle.snapshots[snapshot_id]
    return {
        "snapshot_id": snapshot_id,
        "manifest": manifest,
        "files": snap.files,
        "bytes": snap.bytes,
        "created_at": now,
    }


def _receipt_row(bundle: VerifiedBundle, run_id: str, now: str) -> dict[str, Any]:
    receipt, body = bundle.receipts[run_id]
    committed = receipt.committed
    return {
        "run_id": run_id,
        "receipt_sha256": receipt.receipt_sha256,
        "plan_id": committed.plan_id,
        "action_key": committed.action_key,
        "outcome": committed.outcome,
        "reason": committed.reason,
        # Never answers a run here: reuse is for this store's own evidence.
        "reusable": False,
        "body": body,
        "created_at": now,
    }


def _insert(conn: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
    for part in range(0, len(rows), 500):
        conn.execute(insert(table), rows[part : part + 500])


def insert_ignoring(conn: Connection, table: Table, key: str) -> Any:
    """An INSERT of ``table`` that keeps a row already stored under ``key``."""
    from ..store import insert_on_conflict

    return insert_on_conflict(conn, table).on_conflict_do_nothing(index_elements=[key])
