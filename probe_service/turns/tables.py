"""SQLAlchemy Core tables of agent turns (migration ``0014_turns``; docs/ARCHITECTURE.md,
"The agent's turn").

- ``turns``: one row per ``turn_begin``: the capture root, scope, the snapshot captured
  then, the claims the turn's plan rests on (those current on that snapshot) and its
  expiry, and the client's ``session`` key (a hook finds its session's current turn by
  it). ``seq`` orders turns, so "a later turn" is a comparison, not a clock.
- ``turn_answers``: written once by ``turn_end``: the answer's claim, the snapshot of the
  end-of-turn capture and whether the tree stayed still (``stable``).
- ``turn_blocks``: a plan found stale by a dispatch check, for one claim, under one root
  and scope; ``cleared_by`` is set by the later turn whose stable answer clears it.
- ``dispatch_decisions``: every dispatch check's verdict under its posture, with reasons.
"""

from __future__ import annotations

from sqlalchemy import Boolean, Column, ForeignKey, Integer, String, Table, Text

from ..store.schema import CursorInt, metadata

__all__ = ["dispatch_decisions", "turn_answers", "turn_blocks", "turns"]

turns = Table(
    "turns",
    metadata,
    Column("seq", CursorInt, primary_key=True, autoincrement=True),
    Column("turn_id", String(40), nullable=False, unique=True),
    Column("root", Text, nullable=False),
    Column("scope", String(128), nullable=False),
    Column("question", Text, nullable=True),
    Column("symbols", Text, nullable=False),
    Column("snapshot_id", String(64), nullable=False),
    Column("rests_on", Text, nullable=False),
    Column("interface", String(32), nullable=False),
    Column("session", String(200), nullable=True, index=True),
    # added by 0015_principals: who began it, from the operating system
    Column("actor", String(200), nullable=True),
    Column("began_at", String(32), nullable=False),
    Column("expires_at", String(32), nullable=False),
    sqlite_autoincrement=True,
)

turn_answers = Table(
    "turn_answers",
    metadata,
    Column("turn_id", String(40), ForeignKey("turns.turn_id"), primary_key=True),
    Column("claim_id", String(40), nullable=False),
    Column("end_snapshot_id", String(64), nullable=False),
    Column("stable", Boolean, nullable=False),
    Column("ended_at", String(32), nullable=False),
)

turn_blocks = Table(
    "turn_blocks",
    metadata,
    Column("block_id", String(40), primary_key=True),
    Column("root", Text, nullable=False),
    Column("scope", String(128), nullable=False),
    Column("turn_id", String(40), nullable=False),
    Column("turn_seq", Integer, nullable=False),
    Column("claim_id", String(40), nullable=False),
    Column("snapshot_id", String(64), nullable=False),
    Column("reasons", Text, nullable=False),
    Column("opened_at", String(32), nullable=False),
    Column("cleared_by", String(40), nullable=True),
    Column("cleared_at", String(32), nullable=True),
)

dispatch_decisions = Table(
    "dispatch_decisions",
    metadata,
    Column("decision_id", String(40), primary_key=True),
    Column("turn_id", String(40), nullable=False, index=True),
    Column("tool", String(200), nullable=False),
    Column("arguments_sha256", String(64), nullable=False),
    Column("snapshot_id", String(64), nullable=True),
    Column("posture", String(16), nullable=False),
    Column("verdict", String(16), nullable=False),
    Column("reasons", Text, nullable=False),
    Column("decided_at", String(32), nullable=False),
)
