"""What a recheck reports: per obligation, the reruns of its claim's evidence and what
became of them (docs/ARCHITECTURE.md, "Recheck").

One model serves the request that starts a recheck and every poll of its batch
(``batch_status``), so an agent reads the same fields before and after the runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict
from sqlalchemy import Connection

from ..plans.models import Plan

__all__ = [
    "NEEDS_PERSON",
    "EntryStatus",
    "PersistRuns",
    "RecheckEntry",
    "RecheckReport",
    "RerunRecord",
    "RunLike",
    "RunLookup",
]

#: How the report names a claim the service cannot recheck by itself.
NEEDS_PERSON = "needs a person or an agent"

#: ``queued``: reruns were queued by this request and have not all finished;
#: ``rechecked``: every rerun agreed and the obligation was resolved ``rechecked``;
#: ``disagreed``: a rerun did not agree (it names the receipt); the obligation stays open;
#: ``needs_person``: no evidence the service can run again (``rests_on`` says what there is);
#: ``under_way``: an earlier recheck's runs (``batch_id``) are still running;
#: ``already_resolved``: resolved by someone else before the reruns finished.
EntryStatus = Literal[
    "queued", "rechecked", "disagreed", "needs_person", "under_way", "already_resolved"
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RerunRecord(_Frozen):
    """One rerun: the evidence it repeats, the new plan, and its run's result so far."""

    #: ``receipt``: a receipt the claim rests on; ``plan``: a plan the claim declares.
    evidence_kind: Literal["receipt", "plan"]
    #: The receipt's SHA-256 or the declared plan's id.
    evidence: str
    #: The same plan with only ``snapshot_id`` changed to the target (content-addressed).
    plan_id: str
    policy_id: str
    run_id: str
    state: str = "queued"
    outcome: str | None = None
    reason: str | None = None
    receipt_sha256: str | None = None
    #: Once the run is done: whether its receipt agrees with the claim on the target.
    agrees: bool | None = None
    #: Why it does not agree (another outcome, no receipt, another snapshot …).
    why: str | None = None


class RecheckEntry(_Frozen):
    """One obligation of a recheck."""

    obligation_id: str
    claim_id: str
    scope: str
    statement: str
    claim_outcome: str
    status: EntryStatus
    reruns: tuple[RerunRecord, ...] = ()
    #: For ``needs_person``: the evidence and dependencies the claim rests on.
    rests_on: tuple[str, ...] = ()
    #: Evidence that is not rerun, each with why (an inconclusive receipt never carried a
    #: supported claim; a plan that no longer parses …).
    skipped: tuple[str, ...] = ()
    #: For ``under_way``: the batch of the recheck still running.
    batch_id: str | None = None
    #: What to do next, in words, with the command where there is one.
    next: str = ""


class RecheckReport(_Frozen):
    """A recheck: its batch (None when nothing was queued) and one entry per obligation."""

    batch_id: str | None
    snapshot_id: str
    scope: str | None
    #: True once every entry is final: the batch's runs are done and the recheck settled
    #: (or nothing was queued).
    settled: bool
    entries: tuple[RecheckEntry, ...]
    #: Entries by status.
    counts: dict[str, int]


class RunLike(Protocol):
    """What the claims part reads of a queued run (the queue part's ``RunSummary``)."""

    @property
    def run_id(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def outcome(self) -> str | None: ...
    @property
    def reason(self) -> str | None: ...
    @property
    def receipt_sha256(self) -> str | None: ...


#: The runs of a batch, by batch id: the seam to the queue part, which owns runs (as
#: ``ReceiptLookup`` is the seam to receipts).
RunLookup = Callable[[str], Sequence[RunLike]]

#: Persists plans and one queued run per ``(plan, policy id)`` under a batch id in the
#: caller's transaction and returns the run ids, in order (the queue part's
#: ``persist_runs_in``, bound to the session's queue namespace and reuse choice).
PersistRuns = Callable[[Connection, str, Sequence[tuple[Plan, str]]], list[str]]
