"""Read-only views of claims for operators (docs/ARCHITECTURE.md, "Web view").

``claim_history`` gathers what happened to one claim: its recorded checks, its
obligations with their resolutions and rationale, the supersession chain, a tombstone,
and the audit entries naming it. ``gate_preview`` answers whether a snapshot would pass
the gate without writing anything: the gate itself opens obligations and records checks,
which a page that only looks must never do.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy import Connection, select

from ..store import Store
from ..store.origins import bundle_imports, imported_from, imported_records
from .audit import AuditEntry, audit_entry
from .callers import PYTHON_CALLER, Caller, snapshots_for
from .checking import evaluate_claims
from .lineage import _chain
from .records import ClaimCheck, ClaimRecord, Obligation, Tombstone
from .resolutions import list_in
from .rows import load_baselines, load_claim, load_heads
from .scopes import require_live_claims
from .tables import (
    claim_audit,
    claim_checks,
    claim_supersessions,
    claim_tombstones,
)

__all__ = [
    "ClaimHistory",
    "ClaimOrigin",
    "GatePreview",
    "ImportedRecord",
    "RecordedCheck",
    "claim_history",
    "gate_preview",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class RecordedCheck(_Frozen):
    """A check of the claim recorded by a face (claim_check, gate, change_analyze)."""

    snapshot_id: str
    state: str
    reasons: tuple[str, ...]
    checked_at: str


class Supersession(_Frozen):
    """One link of the chain, with the rationale kept."""

    predecessor_id: str
    successor_id: str
    rationale: str
    created_at: str


class ClaimOrigin(_Frozen):
    """Where an imported claim came from: the bundle and its export (docs/ARCHITECTURE.md,
    "Bundles")."""

    bundle_id: str
    imported_at: str
    exported_at: str | None
    engine_version: str | None


class ImportedRecord(_Frozen):
    """History a bundle carried for the claim (a check, an obligation with its resolution,
    an audit entry of the exporting store), kept apart: it closes nothing here."""

    kind: str
    bundle_id: str
    record: dict[str, Any]


class ClaimHistory(_Frozen):
    """Everything recorded about one claim, newest first where it is a list."""

    claim: ClaimRecord
    chain: tuple[str, ...]
    supersessions: tuple[Supersession, ...]
    tombstone: Tombstone | None
    checks: tuple[RecordedCheck, ...]
    obligations: tuple[Obligation, ...]
    audit: tuple[AuditEntry, ...]
    #: Set for a claim an import created; its carried history is in ``imported``.
    origin: ClaimOrigin | None = None
    imported: tuple[ImportedRecord, ...] = ()


def claim_history(
    store: Store, claim_id: str, *, scope: str | None = None, limit: int = 200
) -> ClaimHistory:
    """Read one claim's history; raises NotFound when it is not stored (in ``scope``)."""
    with store.reading() as conn:
        claim = load_claim(conn, claim_id, scope)
        chain = _chain(conn, claim_id)
        sup = claim_supersessions.c
        links = conn.execute(
            select(claim_supersessions)
            .where(sup.predecessor_id.in_(chain) | sup.successor_id.in_(chain))
            .order_by(sup.created_at)
        ).all()
        tomb = conn.execute(
            select(claim_tombstones).where(claim_tombstones.c.claim_id == claim_id)
        ).first()
        checks = conn.execute(
            select(claim_checks)
            .where(claim_checks.c.claim_id == claim_id)
            .order_by(claim_checks.c.check_id.desc())
            .limit(limit)
        ).all()
        obligations = list_in(conn, claim_id=claim_id, limit=limit)
        audit = conn.execute(
            select(claim_audit)
            .where(claim_audit.c.subject_ids.contains(json.dumps(claim_id)))
            .order_by(claim_audit.c.audit_id.desc())
            .limit(limit)
        ).all()
        origin = _origin(conn, claim_id)
        carried = conn.execute(
            select(imported_records)
            .where(imported_records.c.claim_id == claim_id)
            .order_by(imported_records.c.kind, imported_records.c.digest)
            .limit(limit)
        ).all()
    return ClaimHistory(
        claim=claim,
        chain=tuple(chain),
        supersessions=tuple(
            Supersession(
                predecessor_id=r.predecessor_id,
                successor_id=r.successor_id,
                rationale=r.rationale,
                created_at=r.created_at,
            )
            for r in links
        ),
        tombstone=None
        if tomb is None
        else Tombstone(
            claim_id=tomb.claim_id,
            scope=tomb.scope,
            boundary_key=tomb.boundary_key,
            rationale=tomb.rationale,
            withdrawn_at=tomb.withdrawn_at,
        ),
        checks=tuple(
            RecordedCheck(
                snapshot_id=r.snapshot_id,
                state=r.state,
                reasons=tuple(json.loads(r.reasons)),
                checked_at=r.checked_at,
            )
            for r in checks
        ),
        obligations=tuple(obligations),
        audit=tuple(audit_entry(r) for r in audit),
        origin=origin,
        imported=tuple(
            ImportedRecord(kind=r.kind, bundle_id=r.bundle_id, record=json.loads(r.body))
            for r in carried
        ),
    )


def _origin(conn: Connection, claim_id: str) -> ClaimOrigin | None:
    bundle_id = imported_from(conn, "claim", [claim_id]).get(claim_id)
    if bundle_id is None:
        return None
    row = conn.execute(
        select(bundle_imports.c.imported_at, bundle_imports.c.header).where(
            bundle_imports.c.bundle_id == bundle_id
        )
    ).one()
    header = json.loads(row.header)
    return ClaimOrigin(
        bundle_id=bundle_id,
        imported_at=row.imported_at,
        exported_at=header.get("exported_at"),
        engine_version=header.get("engine_version"),
    )


class GatePreview(_Frozen):
    """What ``gate`` would answer now, computed without writing anything."""

    snapshot_id: str
    scope: str | None
    checked: int
    not_current: tuple[ClaimCheck, ...]
    open_obligations: tuple[Obligation, ...]
    accepted_risk: tuple[Obligation, ...]
    would_pass: bool


def gate_preview(
    store: Store,
    snapshot_id: str,
    *,
    scope: str | None = None,
    allow_empty: bool = False,
    caller: Caller = PYTHON_CALLER,
) -> GatePreview:
    """Recheck every live claim (in ``scope``) at ``snapshot_id`` in memory and say whether
    the gate would pass: no claim that is not current and no open obligation on that
    snapshot. Nothing is opened, closed or recorded. Refuses what the gate refuses:
    NotFound for a snapshot the store does not hold, InvalidInput for a scope (or store)
    without a live claim unless ``allow_empty``. Raises StoreUnavailable."""
    source = snapshots_for(store, caller)
    source.require(snapshot_id, "snapshot_id")
    with store.reading() as conn:
        ids = require_live_claims(conn, scope, allow_empty=allow_empty)
        heads = load_heads(conn, ids)
        baselines = load_baselines(conn, ids)
        still_open = list_in(conn, scope=scope, snapshot_id=snapshot_id, state="open")
        risk = list_in(conn, scope=scope, snapshot_id=snapshot_id, resolution="accepted_risk")
    checks = evaluate_claims(heads, baselines, snapshot_id, source)
    not_current = tuple(c for c in checks if c.state != "current")
    # An open obligation whose claim is current again would be closed by the gate.
    current = {c.claim_id for c in checks if c.state == "current"}
    remaining = tuple(o for o in still_open if o.claim_id not in current)
    return GatePreview(
        snapshot_id=snapshot_id,
        scope=scope,
        checked=len(checks),
        not_current=not_current,
        open_obligations=remaining,
        accepted_risk=tuple(risk),
        would_pass=not not_current and not remaining,
    )
