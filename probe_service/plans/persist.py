"""Persistence of plans (insert-only, by content id) and receipts (once per run)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from sqlalchemy import Column, Connection, Table, select

from ..canonical import canonical_json
from ..errors import Conflict, NotFound, ReceiptInvalid
from ..store import Store, append_event, insert_on_conflict, utc_now
from ..store.referents import gc_removed, hold_referents
from ..store.schema import snapshots
from .confirm import may_answer_later_runs
from .models import Plan, parse_plan, plan_id_of
from .receipt_model import Committed, Receipt, parse_receipt_json
from .tables import plans, receipt_signatures, receipts

log = logging.getLogger(__name__)

__all__ = [
    "find_reusable_receipt",
    "insert_plans",
    "load_envelope",
    "load_plan",
    "load_receipt",
    "load_reusable_receipt",
    "newest_receipt_of_plan",
    "plan_from_body",
    "plan_row",
    "save_plan",
    "save_receipt",
]


def plan_row(plan: Plan) -> dict[str, str]:
    """The stored row of ``plan``: its content id and canonical body."""
    body = canonical_json(plan.canonical()).decode("utf-8")
    return {"plan_id": plan_id_of(plan), "body": body, "created_at": utc_now()}


def insert_plans(conn: Connection, rows: list[dict[str, str]]) -> None:
    """Insert plan rows in the caller's transaction; ids already stored are kept as they are."""
    if rows:
        stmt = insert_on_conflict(conn, plans).on_conflict_do_nothing(index_elements=["plan_id"])
        conn.execute(stmt, rows)


def save_plan(store: Store, plan: Plan) -> tuple[str, bool]:
    """Persist ``plan`` insert-only; return ``(plan_id, created)``.

    The same content always yields the same id; an id can never name other content.
    Raises Conflict if a stored row under this id holds different bytes, NotFound when gc
    removed the plan's snapshot.
    """
    row = plan_row(plan)
    plan_id, body = row["plan_id"], row["body"]
    with store.transaction() as conn:
        # docs/ARCHITECTURE.md, "Retention and gc": hold the snapshot against a concurrent
        # gc; a store gc never removed a snapshot from keeps accepting any id, as before.
        held = hold_referents(conn, snapshots.c.snapshot_id, [plan.snapshot_id])
        if not held and gc_removed(conn, "snapshots"):
            raise NotFound(f"snapshot_id: snapshot {plan.snapshot_id} is no longer stored (gc)")
        insert = insert_on_conflict(conn, plans).values(**row)
        # RETURNING, not rowcount: psycopg under SQLAlchemy reports -1 for this statement.
        stmt = insert.on_conflict_do_nothing(index_elements=["plan_id"]).returning(plans.c.plan_id)
        created = conn.execute(stmt).first() is not None
        stored = conn.execute(select(plans.c.body).where(plans.c.plan_id == plan_id)).scalar_one()
        if stored != body:
            raise Conflict(f"plan {plan_id}: stored content differs from its id")
        if created:
            append_event(conn, "plan", plan_id, {"snapshot_id": plan.snapshot_id})
    return plan_id, created


def load_plan(store: Store, plan_id: str) -> Plan:
    """Return the stored plan ``plan_id``, re-checking that its content still has that id.

    Raises NotFound when it is not stored, Conflict when its content no longer matches.
    """
    with store.reading() as conn:
        body = conn.execute(select(plans.c.body).where(plans.c.plan_id == plan_id)).scalar()
    return plan_from_body(plan_id, body)


def plan_from_body(plan_id: str, body: str | None) -> Plan:
    """The plan ``plan_id`` from its stored ``body`` (None: not stored), re-checking that
    its content still has that id.

    Raises NotFound when it is not stored, Conflict when its content no longer matches.
    """
    if body is None:
        raise NotFound(f"plan {plan_id}: not stored")
    plan = parse_plan(body)
    if plan_id_of(plan) != plan_id:
        raise Conflict(f"plan {plan_id}: stored content no longer matches its id")
    return plan


def save_receipt(
    store: Store,
    run_id: str,
    receipt: Receipt,
    reusable: bool,
    envelope: dict[str, Any] | None = None,
    also: Callable[[Connection], None] | None = None,
) -> bool:
    """Write a receipt, its DSSE ``envelope`` when signed, and its ``probe`` event in one
    transaction, at most once per run; ``also`` writes more in that same transaction (the
    queue marks its run done there) when the receipt is new.

    Returns False (and writes nothing) when this run already has a receipt.
    """
    committed = receipt.committed

    def body(conn: Connection) -> bool:
        insert = insert_on_conflict(conn, receipts).values(
            receipt_sha256=receipt.receipt_sha256,
            run_id=run_id,
            plan_id=committed.plan_id,
            action_key=committed.action_key,
            outcome=committed.outcome,
            reason=committed.reason,
            reusable=reusable,
            # The stored body is the receipt's JSON exactly (docs/ARCHITECTURE.md, "Receipts").
            body=json.dumps(receipt.json_values(), sort_keys=True),
            created_at=utc_now(),
        )
        stmt = insert.on_conflict_do_nothing(index_elements=["run_id"]).returning(
            receipts.c.receipt_sha256
        )
        written = conn.execute(stmt).first() is not None
        if written and envelope is not None:
            conn.execute(
                receipt_signatures.insert().values(
                    run_id=run_id,
                    receipt_sha256=receipt.receipt_sha256,
                    keyid=envelope["signatures"][0]["keyid"],
                    envelope=json.dumps(envelope, sort_keys=True),
                    created_at=utc_now(),
                )
            )
        if written:
            append_event(
                conn,
                "probe",
                committed.plan_id,
                {
                    "run_id": run_id,
                    "receipt_sha256": receipt.receipt_sha256,
                    "outcome": committed.outcome,
                    "reason": committed.reason,
                },
            )
        if written and also is not None:
            also(conn)
        return written

    # Safe to run again when the connection drops, even after a commit whose answer was
    # lost: keyed by run, a second attempt finds the receipt and writes nothing.
    return store.retrying(body, what=f"receipt of run {run_id}")


def load_receipt(store: Store, receipt_or_run_id: str) -> Receipt:
    """Return a stored receipt by its ``receipt_sha256`` or by run id, read by its version.

    Raises NotFound when it is not stored, ReceiptInvalid when the stored body is not a
    receipt this release reads (naming the field).
    """
    body = _first_by_id(store, receipts, receipts.c.body, receipt_or_run_id)
    if body is None:
        raise NotFound(f"receipt {receipt_or_run_id}: not stored")
    return parse_receipt_json(body, f"receipt {receipt_or_run_id}")


def load_envelope(store: Store, receipt_or_run_id: str) -> dict[str, Any]:
    """Return the DSSE envelope of a stored receipt (by receipt sha or run id).

    Raises NotFound when the receipt is not stored or was not signed.
    """
    load_receipt(store, receipt_or_run_id)
    sigs = receipt_signatures
    body = _first_by_id(store, sigs, sigs.c.envelope, receipt_or_run_id)
    if body is None:
        raise NotFound(f"receipt {receipt_or_run_id}: unsigned (no envelope stored)")
    result: dict[str, Any] = json.loads(body)
    return result


def _first_by_id(store: Store, table: Table, column: Column[str], ident: str) -> str | None:
    """The oldest ``column`` of ``table`` whose receipt sha or run id is ``ident``."""
    with store.reading() as conn:
        value: str | None = conn.execute(
            select(column)
            .where((table.c.receipt_sha256 == ident) | (table.c.run_id == ident))
            .order_by(table.c.created_at)
            .limit(1)
        ).scalar()
    return value


def find_reusable_receipt(store: Store, action_key: str) -> Receipt | None:
    """Return the newest reusable receipt for ``action_key``, or None.

    Newest, because a ``--no-reuse`` run exists to replace what an earlier one answered;
    an inconclusive receipt never answers a later action, and a refutation only once
    reproduced (docs/ARCHITECTURE.md, "Confirming a refutation"). The rule is asked again
    of the stored body: a refutation an older release marked reusable (never reproduced)
    answers nothing, and the run executes instead.
    """
    with store.reading() as conn:
        body = conn.execute(
            select(receipts.c.body)
            .where(
                receipts.c.action_key == action_key,
                receipts.c.reusable.is_(True),
                receipts.c.outcome != "inconclusive",
            )
            .order_by(receipts.c.created_at.desc(), receipts.c.receipt_sha256.desc())
            .limit(1)
        ).scalar()
    return _answering(body, f"receipt for action {action_key}")


def load_reusable_receipt(store: Store, run_id: str) -> Receipt | None:
    """The receipt of run ``run_id`` if it may answer a later identical action, else None
    (the rule ``find_reusable_receipt`` applies, asked of one receipt the caller chose)."""
    with store.reading() as conn:
        body = conn.execute(
            select(receipts.c.body).where(
                receipts.c.run_id == run_id,
                receipts.c.reusable.is_(True),
                receipts.c.outcome != "inconclusive",
            )
        ).scalar()
    return _answering(body, f"receipt of run {run_id}")


def _answering(body: str | None, what: str) -> Receipt | None:
    """The stored receipt ``body`` when it may answer a later action, else None."""
    if body is None:
        return None
    return _readable(body, what, may_answer_later_runs)


def newest_receipt_of_plan(store: Store, plan_id: str) -> Receipt | None:
    """Return the newest stored receipt of ``plan_id`` (reusable or not), or None: what a
    run that is not reused is compared with (docs/ARCHITECTURE.md, "Reuse explained")."""
    with store.reading() as conn:
        body = conn.execute(
            select(receipts.c.body)
            .where(receipts.c.plan_id == plan_id)
            .order_by(receipts.c.created_at.desc(), receipts.c.receipt_sha256.desc())
            .limit(1)
        ).scalar()
    if body is None:
        return None
    return _readable(body, f"newest receipt of plan {plan_id}", lambda _: True)


def _readable(body: str, where: str, answers: Callable[[Committed], bool]) -> Receipt | None:
    """The stored ``body`` read, when this release can read it and ``answers`` holds."""
    try:
        receipt = parse_receipt_json(body, where)
    except ReceiptInvalid as exc:
        # A receipt this release cannot read (a later version, written by a newer worker
        # of the farm) answers nothing here: the run executes (docs/UPGRADING.md).
        log.warning("reuse: %s", exc)
        return None
    return receipt if answers(receipt.committed) else None
