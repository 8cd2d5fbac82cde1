"""The administrator's posture of agent turns, per repository root and scope (schema 3).

docs/ARCHITECTURE.md, "The agent's turn": ``block`` (the default: a stale plan's tool
call is refused), ``warn`` (allowed with a message) or ``report`` (recorded only). Only
the policy file sets it, never the repository, the caller or the agent: no request
carries a posture. An entry applies to a turn whose capture root is its ``root`` or lies
below it; the entry with the longest root wins, and among those one naming the turn's
scope beats one naming none.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["DEFAULT_POSTURE", "Posture", "TurnPosture", "posture_for"]

Posture = Literal["block", "warn", "report"]
#: What a root and scope no entry names get: the specification's behaviour.
DEFAULT_POSTURE: Posture = "block"


class TurnPosture(BaseModel):
    """One entry of the file's ``turn_postures`` list."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    root: str = Field(
        min_length=1, max_length=4096, description="An absolute repository root (or a parent)."
    )
    scope: str | None = Field(
        None, max_length=128, description="Only turns of this scope (default: every scope)."
    )
    posture: Posture = Field(description="block, warn or report.")

    @field_validator("root")
    @classmethod
    def _absolute(cls, root: str) -> str:
        if not os.path.isabs(root) or "\0" in root:
            raise ValueError(f"{root!r} is not an absolute path")
        return os.path.normpath(root)


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def posture_for(entries: Sequence[TurnPosture], root: str, scope: str) -> Posture:
    """The posture of turns under ``root`` (resolved, absolute) in ``scope``."""
    best: tuple[int, int] | None = None
    chosen: Posture = DEFAULT_POSTURE
    for entry in entries:
        if entry.scope not in (None, scope):
            continue
        for candidate in {entry.root, os.path.realpath(entry.root)}:
            if _within(root, candidate):
                rank = (len(candidate), entry.scope is not None)
                if best is None or rank > best:
                    best, chosen = rank, entry.posture
    return chosen
