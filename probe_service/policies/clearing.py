"""Who may clear what: principal kinds and clearing rules of the policy file (schema 3).

docs/ARCHITECTURE.md, "Principals and clearing". ``principals`` maps OS user names to a
kind (``person``, ``agent``, ``service``). ``clearing`` lists rules, one per scope (``*``
for every scope a rule does not name): for ``accepted_risk``, ``superseded`` and
``withdrawn`` each rule lists who may resolve (``users`` by name, ``kinds`` by kind) and,
optionally, ``reviewers``: then a resolution is only a **review request** until a listed
reviewer other than the requester approves it. ``rechecked`` needs no rule: a receipt whose
evidence agrees clears an obligation whoever brings it. A scope without a rule keeps the
single-user workflow: anyone but an agent resolves directly. Agents never accept a risk.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..principals import Kind

__all__ = ["CLEARED", "ClearingRule", "Permission", "Resolution", "check_rules", "rule_for"]

Resolution = Literal["accepted_risk", "superseded", "withdrawn"]
#: The resolutions a clearing rule governs (``rechecked`` is cleared by its evidence).
CLEARED: tuple[Resolution, ...] = ("accepted_risk", "superseded", "withdrawn")
_USER = r"^[A-Za-z0-9_.@:-]{1,64}$"


class Permission(BaseModel):
    """Who may make one resolution in one scope, and who must approve it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    users: tuple[str, ...] = Field(
        (), max_length=200, description="OS user names that may request this resolution."
    )
    kinds: tuple[Literal["person", "service"], ...] = Field(
        (),
        max_length=2,
        description="Principal kinds that may request it (person, service); never agent.",
    )
    reviewers: tuple[str, ...] = Field(
        (),
        max_length=200,
        description="People who approve it; when set, a request waits for one of them "
        "(never the requester).",
    )

    @field_validator("users", "reviewers")
    @classmethod
    def _names(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        for name in names:
            if not re.fullmatch(_USER, name):
                raise ValueError(f"{name!r} is not an OS user name")
        return tuple(sorted(set(names)))

    def allows(self, name: str, kind: Kind) -> bool:
        """Whether ``name`` of ``kind`` may request it (an agent never may)."""
        return kind != "agent" and (name in self.users or kind in self.kinds)


class ClearingRule(BaseModel):
    """The clearing rule of one scope."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    scope: str = Field(
        min_length=1, max_length=128, description="The scope it governs; * for every other."
    )
    accepted_risk: Permission | None = Field(None, description="Who may accept a risk.")
    superseded: Permission | None = Field(None, description="Who may supersede a claim.")
    withdrawn: Permission | None = Field(None, description="Who may withdraw a claim.")

    def permission(self, resolution: str) -> Permission | None:
        """This rule's permission for ``resolution``; None: nobody may (or it is not one
        of ``CLEARED``)."""
        if resolution not in CLEARED:
            return None
        found: Permission | None = getattr(self, resolution)
        return found


def check_rules(rules: Sequence[ClearingRule], kinds: Mapping[str, Kind]) -> None:
    """Refuse rules that contradict the principal kinds: a listed user or reviewer whom
    ``principals`` makes an agent, a reviewer who is not a person, a scope named twice.
    Raises ValueError naming the rule."""
    seen: set[str] = set()
    for rule in rules:
        if rule.scope in seen:
            raise ValueError(f"clearing: scope {rule.scope!r} has two rules")
        seen.add(rule.scope)
        for resolution in CLEARED:
            perm = rule.permission(resolution)
            if perm is None:
                continue
            where = f"clearing[{rule.scope!r}].{resolution}"
            for user in perm.users:
                if kinds.get(user, "person") == "agent":
                    raise ValueError(f"{where}: {user!r} is an agent; agents never clear")
            for reviewer in perm.reviewers:
                if kinds.get(reviewer, "person") != "person":
                    raise ValueError(f"{where}: reviewer {reviewer!r} is not a person")


def rule_for(rules: Sequence[ClearingRule], scope: str) -> ClearingRule | None:
    """The rule governing ``scope``: its own, else ``*``, else none."""
    fallback = None
    for rule in rules:
        if rule.scope == scope:
            return rule
        if rule.scope == "*":
            fallback = rule
    return fallback
