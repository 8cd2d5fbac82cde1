"""``dispatch_check``: immediately before a tool runs, recheck what the plan rests on.

docs/ARCHITECTURE.md, "The agent's turn". The working tree is captured again and every
claim the turn's plan rests on (the related claims current at ``turn_begin``, and the
turn's own answer once ``turn_end`` recorded it) is rechecked on it, without executing
anything. A claim that is not current opens a block under the turn's root and scope; a
block stands across turns until a later turn's stable, grounded answer clears it
(``lifecycle.turn_end``). The administrator's posture decides the verdict: under
``block`` a stale or blocked plan is refused, under ``warn`` allowed with a message,
under ``report`` only recorded. Every decision is recorded with its reasons.

The check and the dispatch are separate operations: a write between them is not seen
(a best-effort recheck, as the specification says).
"""

from __future__ import annotations

import secrets
import shlex
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from ..canonical import sha256_of_json
from ..claims import Caller, ClaimCheck, SnapshotSource, claim_check
from ..errors import Conflict
from ..policies.postures import Posture
from ..store import Store, append_event
from .lease import Lease, LeaseHolder, current_holder, lease_release, lease_take
from .lifecycle import Capture
from .models import BlockedPlan, DispatchDecision, DispatchReason, Verdict
from .rows import StoredTurn, insert_block, insert_decision, load_turn, open_blocks

__all__ = ["PostureOf", "clear_command", "dispatch_check", "verdict_under"]

#: The administrator's posture of a root and scope (the policy file, read by the row).
PostureOf = Callable[[str, str], Posture]


def verdict_under(posture: Posture, reasons: Sequence[DispatchReason]) -> Verdict:
    """The verdict of a check with ``reasons`` under ``posture``."""
    if not reasons:
        return "allow"
    return {"block": "block", "warn": "warn", "report": "allow"}[posture]  # type: ignore[return-value]


def clear_command(root: str, scope: str, snapshot_id: str) -> str:
    """What clears a block: recheck the claims, then a later turn's grounded answer."""
    recheck = shlex.join(["byte-probe", "recheck", "--snapshot", snapshot_id, "--scope", scope])
    return (
        f"`{recheck}` (or resolve its obligation), then begin a new turn on {root} and record "
        "its answer with turn_end while the tree stays unchanged"
    )


def _message(verdict: Verdict, posture: Posture, reasons: Sequence[DispatchReason]) -> str:
    if not reasons:
        return "nothing the plan rests on moved"
    claims = ", ".join(sorted({r.claim_id for r in reasons}))
    said = {
        "block": "blocked",
        "warn": "allowed with a warning",
        "allow": "allowed (posture report: recorded only)",
    }[verdict]
    return f"{said} under posture {posture}: the plan rests on stale claim(s) {claims}"


def dispatch_check(
    store: Store,
    turn_id: str,
    tool: str,
    arguments: Mapping[str, Any],
    *,
    capture: Capture,
    posture_of: PostureOf,
    root: str | None = None,
    caller: Caller,
    lease: timedelta | None = None,
    holder: LeaseHolder | None = None,
    now: datetime | None = None,
) -> DispatchDecision:
    """Recheck the turn's plan on the working tree now and decide under the posture
    ``posture_of(root, scope)`` returns; the decision (and any new block) is recorded in
    one transaction.

    With ``lease`` the turn first takes (or renews) the workspace lease on its root for
    that long, so no cooperating capture or turn moves the tree between this check and
    the tool's action; a block verdict gives back a lease this call took.

    Raises NotFound (unknown turn), Conflict (expired turn; ``root`` not the turn's),
    LeaseHeld (another turn leases the root), and what the capture raises.
    """
    now = now or datetime.now(UTC)
    with store.reading() as conn:
        turn = load_turn(conn, turn_id, now)
    if root is not None and root != turn.root:
        raise Conflict(f"root: {root!r} is not the root of turn {turn_id!r} ({turn.root!r})")
    posture: Posture = posture_of(turn.root, turn.scope)
    if lease is None:
        return _decide(store, turn, tool, arguments, capture, posture, caller, now, None)
    held, fresh = lease_take(turn.root, turn_id, holder or current_holder(caller.face), now, lease)
    try:
        decision = _decide(store, turn, tool, arguments, capture, posture, caller, now, held)
    except BaseException:
        if fresh:
            lease_release(turn.root, turn_id, now)
        raise
    if decision.verdict == "block" and fresh:
        lease_release(turn.root, turn_id, now)
        decision = decision.model_copy(update={"lease": None})
    return decision


def _decide(
    store: Store,
    turn: StoredTurn,
    tool: str,
    arguments: Mapping[str, Any],
    capture: Capture,
    posture: Posture,
    caller: Caller,
    now: datetime,
    held: Lease | None,
) -> DispatchDecision:
    """The check itself: capture, recheck, record the decision (one transaction)."""
    turn_id = turn.turn_id
    snapshot_id = capture(turn.root)
    rests_on = list(dict.fromkeys([*turn.rests_on, *([turn.claim_id] if turn.claim_id else [])]))
    checks: list[ClaimCheck] = []
    if rests_on:
        source = SnapshotSource(store, caller.boundary)
        checks = claim_check(store, rests_on, snapshot_id, caller=caller, source=source)
    stale = [c for c in checks if c.state != "current"]
    at = now.isoformat(timespec="microseconds")
    clear = clear_command(turn.root, turn.scope, snapshot_id)
    with store.transaction() as conn:
        standing = open_blocks(conn, turn.root, turn.scope)
        blocked_claims = {b.claim_id for b in standing}
        new_blocks = [
            BlockedPlan(
                block_id="blk_" + secrets.token_hex(16),
                turn_id=turn_id,
                claim_id=c.claim_id,
                snapshot_id=snapshot_id,
                reasons=c.reasons,
                opened_at=at,
            )
            for c in stale
            if c.claim_id not in blocked_claims
        ]
        for block in new_blocks:
            insert_block(conn, turn, block)
        reasons = [
            DispatchReason(
                claim_id=c.claim_id, what_moved=c.reasons, clear_with=clear, kind="stale"
            )
            for c in stale
        ]
        stale_ids = {c.claim_id for c in stale}
        reasons += [
            DispatchReason(
                claim_id=b.claim_id,
                what_moved=b.reasons,
                clear_with=clear,
                kind="blocked",
            )
            for b in standing
            if b.claim_id not in stale_ids
        ]
        verdict = verdict_under(posture, reasons)
        decision = DispatchDecision(
            decision_id="dsp_" + secrets.token_hex(16),
            turn_id=turn_id,
            tool=tool,
            posture=posture,
            verdict=verdict,
            snapshot_id=snapshot_id,
            reasons=tuple(reasons),
            checks=tuple(checks),
            message=_message(verdict, posture, reasons),
            decided_at=at,
            lease=held,
        )
        insert_decision(conn, decision, sha256_of_json(dict(arguments)))
        append_event(
            conn,
            "dispatch_decided",
            decision.decision_id,
            {"turn_id": turn_id, "tool": tool, "posture": posture, "verdict": verdict},
        )
    return decision
