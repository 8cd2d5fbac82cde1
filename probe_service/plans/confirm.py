"""A refutation answers later runs only once it was reproduced (docs/ARCHITECTURE.md,
"Trust rules" and "Confirming a refutation").

A failure can come from outside the program: a concurrent run exhausting a host-wide
budget made an honest probe fail, and under ``failure_refutes`` that failure refuted. So
the first execution that decides ``refutes`` is executed once more before its receipt
may answer a later identical run -- on another worker when the farm has one, in the same
process otherwise. Both refute: the receipt says ``confirmed``. Anything else: the run
ends ``inconclusive`` (``flaky``) and nothing is cached. A policy may turn this off
(``confirm_refutes: false``); its refutations say ``unconfirmed`` and are reused.

The rule is one function, ``may_answer_later_runs``: the receipt writer stores its answer
as the row's ``reusable`` flag and the cache lookup asks it again of the stored body, so
a refutation written by an older release (no ``confirmation``) never answers a run.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import ProbeServiceError, ReceiptInvalid
from ..policies import Policy
from .receipt_model import Committed, Operational, parse_committed, parse_operational
from .receipt_parts import CommittedConfirmation

__all__ = [
    "CONFIRMED",
    "DISAGREED",
    "FLAKY",
    "UNCONFIRMED",
    "ConfirmationHandedOff",
    "HandOff",
    "ReceiptDraft",
    "awaits_confirmation",
    "confirmation_required",
    "may_answer_later_runs",
    "settle",
]

#: ``confirmation.state`` values: both executions refuted; the second did not; the
#: policy turned confirmation off, so the first refutation stands alone.
CONFIRMED, DISAGREED, UNCONFIRMED = "confirmed", "disagreed", "unconfirmed"
#: The reason of a run whose refutation was not reproduced.
FLAKY = "flaky"

#: What the commitment keeps of the confirming execution: enough to see what it decided
#: and to check its kept output, never its worker (operational, like the first's).
_COMMITTED_OF_SECOND = (
    "status",
    "exit_code",
    "check",
    "outcome",
    "reason",
    "stdout_sha256",
    "stderr_sha256",
    "elapsed_us",
)
#: What the operational part keeps of it; its preflight and JUnit output are dropped
#: (the commitment has no digest to check them against).
_OPERATIONAL_OF_SECOND = (
    "worker",
    "started_at",
    "finished_at",
    "wall_seconds",
    "memory_peak_bytes",
    "detail",
    "launcher",
    "phases",
    "stdout_b64",
    "stderr_b64",
    "possible_sandbox_denial",
)


@dataclass(frozen=True)
class ReceiptDraft:
    """One execution's receipt fields before signing and writing."""

    committed: Committed
    operational: Operational = field(default_factory=Operational)

    def to_json(self) -> str:
        """The draft as stored while it waits for its confirmation on another worker."""
        return json.dumps(
            {
                "committed": self.committed.json_values(),
                "operational": self.operational.json_values(),
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> ReceiptDraft:
        """Read a stored draft; raises ReceiptInvalid when it is not one."""
        where = "pending confirmation"
        try:
            value = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise ReceiptInvalid(f"{where}: not JSON ({exc})") from exc
        if not isinstance(value, dict):
            raise ReceiptInvalid(f"{where}: 'committed' or 'operational' missing")
        return cls(
            parse_committed(value.get("committed"), where),
            parse_operational(value.get("operational"), where),
        )


#: Offered the first refutation of a queued run: True when it took the confirmation
#: elsewhere (or the run is no longer this worker's), False to confirm it here, now.
HandOff = Callable[[ReceiptDraft], bool]


class ConfirmationHandedOff(ProbeServiceError):
    """Control flow, like dramatiq's ``Retry``: the run's first refutation went to another
    worker for its confirmation, so this call writes no receipt. Raised by ``probe_run``
    only to a caller that passed ``hand_off``."""

    code = "confirmation_handed_off"

    def __init__(self, run_id: str) -> None:
        super().__init__(f"run {run_id}: confirmation handed to another worker")
        self.run_id = run_id


def confirmation_required(policy: Policy) -> bool:
    """Whether ``policy`` wants refutations reproduced; unset means yes."""
    return policy.confirm_refutes is not False


def awaits_confirmation(draft: ReceiptDraft, policy: Policy) -> bool:
    """True for a first execution that ran to completion, refuted, under a policy that
    wants it reproduced."""
    committed = draft.committed
    return (
        committed.status == "ok"
        and committed.outcome == "refutes"
        and confirmation_required(policy)
    )


def settle(draft: ReceiptDraft, policy: Policy, first: ReceiptDraft | None) -> ReceiptDraft:
    """The receipt fields to write: ``draft`` as the confirmation of ``first`` when there
    is one; a refutation the policy exempts marked ``unconfirmed``; any other unchanged."""
    if first is not None:
        return _confirmed_by(first, draft)
    if draft.committed.outcome == "refutes" and not confirmation_required(policy):
        unconfirmed = CommittedConfirmation(state=UNCONFIRMED, required=False)
        marked = draft.committed.model_copy(update={"confirmation": unconfirmed})
        return ReceiptDraft(marked, draft.operational)
    return draft


def _confirmed_by(first: ReceiptDraft, second: ReceiptDraft) -> ReceiptDraft:
    """``first``'s receipt with ``second`` as its confirmation: still ``refutes`` when the
    second refuted too, else ``inconclusive``/``flaky``."""
    again = second.committed
    agreed = again.outcome == "refutes"
    same = first.operational.worker == second.operational.worker
    confirmation = CommittedConfirmation(
        state=CONFIRMED if agreed else DISAGREED,
        required=True,
        # Committed, unlike the worker names: whether the reproduction was independent of
        # the first worker is part of what the receipt claims.
        on="same_worker" if same else "another_worker",
        **{k: getattr(again, k) for k in _COMMITTED_OF_SECOND},
    )
    update: dict[str, object] = {"confirmation": confirmation}
    if not agreed:
        update.update(outcome="inconclusive", reason=FLAKY)
    kept = {
        k: v for k, v in second.operational.json_values().items() if k in _OPERATIONAL_OF_SECOND
    }
    operational = first.operational.model_copy(
        update={"confirmation": Operational.model_validate(kept)}
    )
    return ReceiptDraft(first.committed.model_copy(update=update), operational)


def may_answer_later_runs(committed: Committed) -> bool:
    """Whether a receipt may answer a later identical action (docs/ARCHITECTURE.md,
    "Trust rules"): a probe that ran to completion with a decided outcome, and for
    ``refutes`` a confirmed one, or one whose policy turned confirmation off."""
    if committed.status != "ok" or committed.outcome == "inconclusive":
        return False
    if committed.outcome != "refutes":
        return True
    confirmation = committed.confirmation
    if confirmation is None:
        return False  # an older release's refutation: never reproduced
    state = confirmation.state
    return state == CONFIRMED or (state == UNCONFIRMED and confirmation.required is False)
