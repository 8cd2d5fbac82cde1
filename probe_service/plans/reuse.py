"""Saying why a run was or was not answered by a stored receipt (the result's ``reuse``).

docs/ARCHITECTURE.md, "Reuse explained": a run is reused only when every input of its
action is identical (``run.action_inputs``). When it is not, the run names the inputs that
differ from the newest receipt of the same plan, so "why did this run again?" has an answer
on every face (``run --explain-reuse`` on the CLI). Each receipt keeps the inputs it was
keyed with beside its commitment (``operational.action_inputs``), environment values as
digests only; a receipt from before then is compared on what its committed fields show.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..canonical import sha256_hex
from .receipt_model import Committed, Receipt

__all__ = [
    "ReuseExplanation",
    "explain_miss",
    "explanation",
    "recorded_inputs",
    "recorded_reuse",
    "reused_by",
]

Why = Literal[
    "reused",
    "reuse_off",
    "first_run",
    "inputs_differ",
    "not_reusable",
    "confirming",
    "not_recorded",
]

#: What each answer means, in words (``ReuseExplanation.detail``).
_DETAIL: dict[str, str] = {
    "reused": "a stored receipt of the identical action answered this run",
    "reuse_off": "reuse was turned off for this run (reuse: false, --no-reuse)",
    "first_run": "no earlier receipt of this plan exists",
    "inputs_differ": "the newest receipt of this plan was made with other inputs",
    "not_reusable": (
        "the newest receipt of this plan has the same inputs but cannot answer a later run "
        "(inconclusive, or a refutation not yet confirmed)"
    ),
    "confirming": "this execution confirms a first refutation; it never reuses",
    "not_recorded": "this receipt was written before runs recorded why they executed",
}


class ReuseExplanation(BaseModel):
    """Why a run was, or was not, answered by a stored receipt."""

    model_config = ConfigDict(frozen=True)

    reused: bool
    why: Why
    compared_with: str | None = Field(
        None,
        description="The receipt compared: the one that answered, or the newest receipt of "
        "the same plan.",
    )
    differs: list[str] = Field(
        default_factory=list,
        description="Inputs that differ from that receipt's: snapshot_id, policy_digest, "
        "executable, environment.NAME, sandbox_digest, toolchains.NAME, decision_rules.",
    )
    detail: str = ""

    def explained(self) -> str:
        """One line for people."""
        text = self.detail or _DETAIL[self.why]
        if self.differs:
            text += f": {', '.join(self.differs)}"
        if self.compared_with:
            text += f" (receipt {self.compared_with[:12]})"
        return text


def explanation(why: Why, **fields: Any) -> ReuseExplanation:
    """The explanation ``why``, with its words and ``fields``."""
    return ReuseExplanation(reused=why == "reused", why=why, detail=_DETAIL[why], **fields)


def reused_by(receipt_sha256: str) -> ReuseExplanation:
    """The explanation of a run answered by the receipt ``receipt_sha256``."""
    return explanation("reused", compared_with=receipt_sha256)


def recorded_reuse(value: dict[str, Any] | None) -> ReuseExplanation:
    """The explanation a receipt recorded when it was written; ``not_recorded`` for a
    receipt without one, or with one this release does not read (a later release's)."""
    if value is None:
        return explanation("not_recorded")
    try:
        return ReuseExplanation.model_validate(value)
    except ValidationError:
        return explanation("not_recorded")


def recorded_inputs(inputs: dict[str, Any]) -> dict[str, Any]:
    """The action inputs a receipt keeps beside its commitment (``ActionInputs`` dumped as
    JSON), environment values replaced by their SHA-256: the names say what differs, and no
    value the worker passed is repeated outside the key."""
    environment = {
        name: sha256_hex(value.encode("utf-8", "surrogatepass"))
        for name, value in inputs["environment"]
    }
    return {
        **{k: v for k, v in inputs.items() if k not in ("environment", "toolchains")},
        "environment": environment,
        "toolchains": dict(inputs["toolchains"]),
    }


def _committed_inputs(committed: Committed) -> dict[str, Any]:
    """What an older receipt's committed fields show of its inputs (no environment, no
    decision rules: it did not record them)."""
    executable = committed.executable
    return {
        "snapshot_id": committed.snapshot_id,
        "policy_digest": committed.policy_digest,
        "executable_path": executable.path if executable else "unresolved",
        "executable_sha256": executable.sha256 if executable else "unresolved",
        "sandbox_digest": committed.sandbox_digest,
        "toolchains": {t.name: t.sha256 for t in committed.toolchains or ()},
    }


def _named_differences(ours: dict[str, Any], theirs: dict[str, Any]) -> list[str]:
    differs: list[str] = [
        key
        for key in ("snapshot_id", "policy_digest", "sandbox_digest", "decision_rules")
        if key in theirs and ours.get(key) != theirs[key]
    ]
    if (ours["executable_path"], ours["executable_sha256"]) != (
        theirs["executable_path"],
        theirs["executable_sha256"],
    ):
        differs.append("executable")
    for part in ("environment", "toolchains"):
        if part not in theirs:
            continue
        mine, other = ours[part], theirs[part]
        differs += [f"{part}.{name}" for name in sorted(set(mine) | set(other))
                    if mine.get(name) != other.get(name)]  # fmt: skip
    return differs


def explain_miss(
    inputs: dict[str, Any],
    action_key: str,
    newest: Receipt | None,
    *,
    reuse: bool,
) -> ReuseExplanation:
    """Why a run with ``inputs`` (``recorded_inputs``) and ``action_key`` executes instead
    of being answered: ``newest`` is the newest stored receipt of the same plan, if any."""
    if not reuse:
        return explanation("reuse_off")
    if newest is None:
        return explanation("first_run")
    sha, committed = newest.receipt_sha256, newest.committed
    if committed.action_key == action_key:
        return explanation("not_reusable", compared_with=sha)
    theirs = newest.operational.action_inputs
    differs = _named_differences(inputs, theirs or _committed_inputs(committed))
    if theirs is None:
        # Its environment and decision rules went unrecorded: one of them differs, or
        # something the comparison above shows.
        differs = differs or ["environment or decision_rules (not recorded by that receipt)"]
    # Keys differ, every named input agrees: an input another release keyed differently.
    differs = differs or ["an input another release recorded differently"]
    return explanation("inputs_differ", compared_with=sha, differs=differs)
