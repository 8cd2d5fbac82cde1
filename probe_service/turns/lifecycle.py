"""``turn_begin`` and ``turn_end``: a brief before the turn, a recorded boundary after.

docs/ARCHITECTURE.md, "The agent's turn". ``turn_begin`` captures the working tree and
answers, in one call, the related live claims with their applicability on that snapshot,
the open obligations of the scope and the plans still blocked under the root and scope;
the related claims found current are what the turn's plan rests on. ``turn_end`` records
the answer ``unresolved`` against the turn's snapshot with the boundary
``boundary.answer_dependencies`` computes, then captures again: an answer whose tree moved
during the turn is kept, but is not grounded on a stable snapshot and clears nothing.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

from sqlalchemy import insert
from sqlalchemy.exc import IntegrityError

from ..claims import (
    AnswerRequest,
    Caller,
    KnowledgeHit,
    SnapshotSource,
    build_answer,
    knowledge_query,
    obligation_list,
    write_answer,
)
from ..claims.models import SpanRef
from ..errors import LeaseHeld, TurnConflict
from ..policies.postures import Posture
from ..principals import current_actor
from ..safe_text import safe_line
from ..store import Store, append_event
from .boundary import SymbolRef, answer_dependencies
from .lease import lease_release
from .models import BlockedPlan, TurnBegun, TurnEnded
from .rows import check_unanswered, clear_blocks, load_turn, open_blocks
from .tables import turn_answers, turns

__all__ = ["BRIEF_CLAIMS", "TURN_TTL", "Capture", "turn_begin", "turn_end"]

#: Captures a root (as the turn stored it) and returns the snapshot id: the row's
#: confinement and the snapshot part, or a later local service doing both.
Capture = Callable[[str], str]
#: How long a turn id is accepted after ``turn_begin``.
TURN_TTL = timedelta(hours=12)
#: Bounds of the brief: related claims, open obligations, blocked plans.
BRIEF_CLAIMS = 20
BRIEF_OBLIGATIONS = 50
BRIEF_BLOCKS = 20


def _related(
    store: Store,
    scope: str,
    snapshot_id: str,
    texts: Sequence[str],
    paths: Sequence[str],
    caller: Caller,
    source: SnapshotSource,
) -> list[KnowledgeHit]:
    """Claims matching each text (every significant word) or depending on a path."""
    found: dict[str, KnowledgeHit] = {}
    asks = [{"text": t} for t in texts] + ([{"paths": tuple(paths)}] if paths else [])
    for ask in asks:
        for hit in knowledge_query(
            store,
            scope=scope,
            target_snapshot=snapshot_id,
            limit=BRIEF_CLAIMS,
            caller=caller,
            source=source,
            **ask,
        ):
            found.setdefault(hit.claim.claim_id, hit)
    return list(found.values())


def _brief_text(
    snapshot_id: str, hits: Sequence[KnowledgeHit], blocks: Sequence[BlockedPlan], obligations: int
) -> str:
    lines = [f"Snapshot {snapshot_id}."]
    for hit in hits:
        state = hit.applicability.state
        lines.append(f"- claim {hit.claim.claim_id} [{state}]: {safe_line(hit.claim.statement)}")
    if obligations:
        lines.append(f"{obligations} open obligation(s) in this scope.")
    for block in blocks:
        lines.append(
            f"BLOCKED: a plan resting on claim {block.claim_id} went stale "
            f"({safe_line('; '.join(block.reasons))}); tool calls stay blocked until a later "
            "turn records a grounded answer (turn_end on an unchanged tree)."
        )
    if not hits and not blocks:
        lines.append("No related claim and no blocked plan.")
    return "\n".join(lines)


def turn_begin(
    store: Store,
    root: str,
    scope: str,
    *,
    capture: Capture,
    posture: Posture,
    question: str | None = None,
    symbols: Sequence[SymbolRef] = (),
    session: str | None = None,
    caller: Caller,
    now: datetime | None = None,
) -> TurnBegun:
    """Capture ``root`` and brief the turn; the turn is recorded in one transaction.

    Raises what the capture raises (UnsafePath, LimitExceeded, UnstableWorkingTree).
    """
    now = now or datetime.now(UTC)
    snapshot_id = capture(root)
    source = SnapshotSource(store, caller.boundary)
    texts = [t for t in (question, *(s.name for s in symbols)) if t]
    paths = list(dict.fromkeys(s.file for s in symbols if s.file))
    hits = _related(store, scope, snapshot_id, texts, paths, caller, source)
    kept = hits[:BRIEF_CLAIMS]
    still_open = obligation_list(store, scope=scope, state="open", limit=BRIEF_OBLIGATIONS + 1)
    with store.reading() as conn:
        blocks = open_blocks(conn, root, scope, BRIEF_BLOCKS + 1)
    omitted = (
        len(hits)
        - len(kept)
        + max(0, len(still_open) - BRIEF_OBLIGATIONS)
        + max(0, len(blocks) - BRIEF_BLOCKS)
    )
    rests_on = tuple(h.claim.claim_id for h in kept if h.applicability.state == "current")
    turn_id = "trn_" + secrets.token_hex(16)
    expires = now + TURN_TTL
    with store.transaction() as conn:
        conn.execute(
            insert(turns).values(
                turn_id=turn_id,
                root=root,
                scope=scope,
                question=question,
                symbols=json.dumps([s.model_dump() for s in symbols]),
                snapshot_id=snapshot_id,
                rests_on=json.dumps(list(rests_on)),
                interface=caller.face,
                actor=current_actor().name,
                session=session,
                began_at=now.isoformat(timespec="microseconds"),
                expires_at=expires.isoformat(timespec="microseconds"),
            )
        )
        append_event(conn, "turn_begun", turn_id, {"scope": scope, "snapshot_id": snapshot_id})
    return TurnBegun(
        turn_id=turn_id,
        root=root,
        scope=scope,
        snapshot_id=snapshot_id,
        expires_at=expires.isoformat(timespec="microseconds"),
        posture=posture,
        claims=tuple(kept),
        open_obligations=tuple(still_open[:BRIEF_OBLIGATIONS]),
        blocked_plans=tuple(blocks[:BRIEF_BLOCKS]),
        rests_on=rests_on,
        omitted=omitted,
        text=_brief_text(snapshot_id, kept, blocks[:BRIEF_BLOCKS], len(still_open)),
    )


def turn_end(
    store: Store,
    turn_id: str,
    answer: str,
    spans: Sequence[SpanRef],
    *,
    capture: Capture,
    symbols: Sequence[SymbolRef] | None = None,
    caller: Caller,
    now: datetime | None = None,
) -> TurnEnded:
    """Record the turn's answer with the boundary the service computes, then the
    end-of-turn stability check; a stable answer clears earlier turns' blocks.

    Raises NotFound (unknown turn), Conflict (expired), TurnConflict (already ended, or
    ended by a concurrent call: exactly one records), InvalidClaim (a span the snapshot
    refuses), and what the capture raises.
    """
    now = now or datetime.now(UTC)
    with store.reading() as conn:
        turn = load_turn(conn, turn_id, now)
    check_unanswered(turn)
    named = (
        list(symbols)
        if symbols is not None
        else [SymbolRef.model_validate(s) for s in turn.symbols]
    )
    source = SnapshotSource(store, caller.boundary)
    tree = source.require(turn.snapshot_id, "turn")
    dependencies, lines = answer_dependencies(tree.entries, spans, named)
    request = AnswerRequest(
        scope=turn.scope,
        question=turn.question or f"turn {turn.turn_id}",
        answer=answer,
        snapshot_id=turn.snapshot_id,
        spans=tuple(spans),
        dependencies=tuple(dependencies),
    )
    record = build_answer(request, source)
    # The end-of-turn stability check: capture again, after the boundary was computed.
    end_snapshot = capture(turn.root)
    stable = end_snapshot == turn.snapshot_id
    at = now.isoformat(timespec="microseconds")
    with store.transaction() as conn:
        # Of two turn_end calls at once exactly one records: the turn's row is locked and
        # checked again here, and the answer's key refuses a second row all the same.
        check_unanswered(load_turn(conn, turn_id, now, lock=True))
        record = write_answer(conn, record, caller.face)
        try:
            conn.execute(
                insert(turn_answers).values(
                    turn_id=turn_id,
                    claim_id=record.claim_id,
                    end_snapshot_id=end_snapshot,
                    stable=stable,
                    ended_at=at,
                )
            )
        except IntegrityError as exc:
            raise TurnConflict(f"turn: {turn_id!r} ended concurrently; one answer is kept") from exc
        cleared = clear_blocks(conn, turn, at) if stable else []
        append_event(
            conn,
            "turn_ended",
            turn_id,
            {"claim_id": record.claim_id, "stable": stable, "cleared": cleared},
        )
    # The turn is over: its lease (if any) ends with it, so no tree stays held by a turn
    # that can dispatch nothing more.
    try:
        released = lease_release(turn.root, turn_id, now)
    except LeaseHeld:
        released = False
    if stable:
        note = f"answer recorded on a stable snapshot; {len(cleared)} block(s) cleared"
    else:
        note = (
            f"the tree moved during the turn (now {end_snapshot}): the answer is recorded "
            f"against the turn's snapshot {turn.snapshot_id}, not grounded on a stable "
            "snapshot, and clears no block; begin a new turn on the current tree"
        )
    return TurnEnded(
        turn_id=turn_id,
        claim_id=record.claim_id,
        snapshot_id=turn.snapshot_id,
        end_snapshot_id=end_snapshot,
        stable=stable,
        grounded=stable,
        cleared_blocks=tuple(cleared),
        boundary=tuple(lines),
        note=note,
        lease_released=released,
    )
