"""Reading and writing the turn tables inside the caller's connection."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, insert, select, update

from ..errors import Conflict, NotFound, TurnConflict
from .models import BlockedPlan, DispatchDecision
from .tables import dispatch_decisions, turn_answers, turn_blocks, turns

__all__ = [
    "StoredTurn",
    "check_unanswered",
    "clear_blocks",
    "insert_block",
    "insert_decision",
    "load_decisions",
    "load_turn",
    "load_turns",
    "open_blocks",
    "session_turn",
]


@dataclass(frozen=True)
class StoredTurn:
    """A ``turns`` row with its answer, if ``turn_end`` recorded one."""

    seq: int
    turn_id: str
    root: str
    scope: str
    question: str | None
    symbols: tuple[dict[str, str | None], ...]
    snapshot_id: str
    rests_on: tuple[str, ...]
    began_at: str
    expires_at: str
    claim_id: str | None
    stable: bool | None
    #: Who began it (None for turns older than migration ``0015_principals``).
    actor: str | None = None


def _turn(row: object, answer: object | None) -> StoredTurn:
    r = row._mapping  # type: ignore[attr-defined]
    a = None if answer is None else answer._mapping  # type: ignore[attr-defined]
    return StoredTurn(
        seq=r["seq"],
        turn_id=r["turn_id"],
        root=r["root"],
        scope=r["scope"],
        question=r["question"],
        symbols=tuple(json.loads(r["symbols"])),
        snapshot_id=r["snapshot_id"],
        rests_on=tuple(json.loads(r["rests_on"])),
        began_at=r["began_at"],
        expires_at=r["expires_at"],
        claim_id=None if a is None else a["claim_id"],
        stable=None if a is None else bool(a["stable"]),
        actor=r["actor"],
    )


def _with_answer(conn: Connection, row: Any) -> StoredTurn:
    answer = conn.execute(select(turn_answers).where(turn_answers.c.turn_id == row.turn_id)).first()
    return _turn(row, answer)


def load_turn(conn: Connection, turn_id: str, now: datetime, *, lock: bool = False) -> StoredTurn:
    """The turn ``turn_id``; NotFound naming ``turn`` when it is unknown, Conflict when it
    expired (docs/ARCHITECTURE.md, "The agent's turn": a turn lives ``TURN_TTL``).

    With ``lock`` (inside a write transaction) the turn's row is locked until the
    transaction ends, so two writers of one turn take turns: PostgreSQL's ``FOR UPDATE``;
    SQLite's write transactions are serial already (``BEGIN IMMEDIATE``)."""
    query = select(turns).where(turns.c.turn_id == turn_id)
    row = conn.execute(query.with_for_update() if lock else query).first()
    if row is None:
        raise NotFound(f"turn: no turn {turn_id!r} in the store (turn_begin returns one)")
    turn = _with_answer(conn, row)
    if datetime.fromisoformat(turn.expires_at) <= now:
        raise Conflict(
            f"turn: {turn_id!r} expired at {turn.expires_at}; begin a new turn (turn_begin)"
        )
    return turn


def session_turn(conn: Connection, root: str, session: str, now: datetime) -> StoredTurn | None:
    """The newest unexpired turn of client ``session`` under ``root``, if any."""
    t = turns.c
    row = conn.execute(
        select(turns).where(t.root == root, t.session == session).order_by(t.seq.desc()).limit(1)
    ).first()
    if row is None or datetime.fromisoformat(row.expires_at) <= now:
        return None
    return _with_answer(conn, row)


def load_turns(conn: Connection, limit: int) -> list[StoredTurn]:
    """The newest ``limit`` turns, newest first, expired ones included."""
    rows = conn.execute(select(turns).order_by(turns.c.seq.desc()).limit(limit)).all()
    ids = [r.turn_id for r in rows]
    answers = {
        a.turn_id: a
        for a in conn.execute(select(turn_answers).where(turn_answers.c.turn_id.in_(ids)))
    }
    return [_turn(r, answers.get(r.turn_id)) for r in rows]


def _block(row: object) -> BlockedPlan:
    r = row._mapping  # type: ignore[attr-defined]
    return BlockedPlan(
        block_id=r["block_id"],
        turn_id=r["turn_id"],
        claim_id=r["claim_id"],
        snapshot_id=r["snapshot_id"],
        reasons=tuple(json.loads(r["reasons"])),
        opened_at=r["opened_at"],
    )


def open_blocks(conn: Connection, root: str, scope: str, limit: int = 1000) -> list[BlockedPlan]:
    """Blocks under ``root`` and ``scope`` no stable answer cleared, oldest first."""
    b = turn_blocks.c
    query = (
        select(turn_blocks)
        .where(b.root == root, b.scope == scope, b.cleared_by.is_(None))
        .order_by(b.opened_at, b.block_id)
        .limit(limit)
    )
    return [_block(row) for row in conn.execute(query)]


def insert_block(conn: Connection, turn: StoredTurn, block: BlockedPlan) -> None:
    """Record ``block``, opened by ``turn``."""
    conn.execute(
        insert(turn_blocks).values(
            block_id=block.block_id,
            root=turn.root,
            scope=turn.scope,
            turn_id=turn.turn_id,
            turn_seq=turn.seq,
            claim_id=block.claim_id,
            snapshot_id=block.snapshot_id,
            reasons=json.dumps(list(block.reasons)),
            opened_at=block.opened_at,
        )
    )


def clear_blocks(conn: Connection, turn: StoredTurn, at: str) -> list[str]:
    """Clear the open blocks of ``turn``'s root and scope that earlier turns opened; the
    ids cleared. Only a later turn clears a block (docs/ARCHITECTURE.md, "The agent's
    turn"): the turn that found a plan stale cannot vouch for it."""
    b = turn_blocks.c
    where = (
        (b.root == turn.root)
        & (b.scope == turn.scope)
        & b.cleared_by.is_(None)
        & (b.turn_seq < turn.seq)
    )
    ids = [row[0] for row in conn.execute(select(b.block_id).where(where).order_by(b.block_id))]
    if ids:
        conn.execute(
            update(turn_blocks)
            .where(b.block_id.in_(ids))
            .values(cleared_by=turn.turn_id, cleared_at=at)
        )
    return ids


def insert_decision(conn: Connection, decision: DispatchDecision, arguments_sha256: str) -> None:
    """Record one dispatch decision."""
    conn.execute(
        insert(dispatch_decisions).values(
            decision_id=decision.decision_id,
            turn_id=decision.turn_id,
            tool=decision.tool,
            arguments_sha256=arguments_sha256,
            snapshot_id=decision.snapshot_id,
            posture=decision.posture,
            verdict=decision.verdict,
            reasons=decision.model_dump_json(include={"reasons", "message"}),
            decided_at=decision.decided_at,
        )
    )


def load_decisions(conn: Connection, turn_ids: list[str]) -> dict[str, list[DispatchDecision]]:
    """Every decision of each turn, oldest first."""
    d = dispatch_decisions.c
    found: dict[str, list[DispatchDecision]] = {}
    rows = conn.execute(
        select(dispatch_decisions).where(d.turn_id.in_(turn_ids)).order_by(d.decided_at)
    )
    for row in rows:
        body = json.loads(row.reasons)
        found.setdefault(row.turn_id, []).append(
            DispatchDecision(
                decision_id=row.decision_id,
                turn_id=row.turn_id,
                tool=row.tool,
                posture=row.posture,
                verdict=row.verdict,
                snapshot_id=row.snapshot_id or "",
                reasons=body["reasons"],
                checks=(),
                message=body["message"],
                decided_at=row.decided_at,
            )
        )
    return found


def check_unanswered(turn: StoredTurn) -> None:
    """TurnConflict when ``turn`` already recorded its answer."""
    if turn.claim_id is not None:
        raise TurnConflict(
            f"turn: {turn.turn_id!r} already ended with answer {turn.claim_id}; its answer "
            "is recorded once (begin a new turn for another)"
        )
