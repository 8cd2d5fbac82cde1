"""The seam to probe receipts, which another part (plans/receipts) owns.

``ReceiptLookup`` maps a receipt id to the ``ReceiptFacts`` it committed to (oracle outcome
``supports``/``refutes``/``inconclusive``, the snapshot it ran on, the plan it ran) or ``None``
when the id is unknown. The claims part only reads receipts through it, so a caller cannot
assert an outcome, a snapshot or a plan its evidence lacks. ``store_receipts`` always knows
the snapshot and plan; a lookup that cannot tell (``None``) is trusted for the outcome only,
and never closes an obligation (docs/ARCHITECTURE.md, "Trust rules": evidence is bound to
the snapshot it ran on).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..canonical import sha256_of_json
from ..errors import NotFound
from ..plans.persist import load_receipt
from ..plans.receipts import verify_stored_receipt
from ..plans.signing import receipt_signer
from ..store import Store
from .records import Outcome

__all__ = [
    "AGREES",
    "ReceiptFacts",
    "ReceiptLookup",
    "no_receipts",
    "outcome_from_receipts",
    "plan_shape",
    "store_receipts",
]


@dataclass(frozen=True)
class ReceiptFacts:
    """What a receipt committed to that a claim or a resolution rests on."""

    outcome: str
    snapshot_id: str | None = None
    plan_id: str | None = None
    #: The plan without its snapshot: the same probe run on another snapshot has another
    #: plan id but the same shape, which is what a recheck must repeat.
    plan_shape: str | None = None
    #: The fingerprint of the key that signed the receipt, or ``unsigned``
    #: (docs/ARCHITECTURE.md, "Signed receipts").
    signer: str = "unsigned"


def plan_shape(plan: object) -> str | None:
    """Digest of a plan's canonical JSON without its ``snapshot_id``; None if not a plan."""
    if not isinstance(plan, dict):
        return None
    return sha256_of_json({k: v for k, v in plan.items() if k != "snapshot_id"})


ReceiptLookup = Callable[[str], ReceiptFacts | None]

#: The claim outcome each oracle outcome carries.
AGREES = {"supports": "supported", "refutes": "refuted", "inconclusive": "unresolved"}


def no_receipts(receipt: str) -> ReceiptFacts | None:
    """A lookup that knows no receipt (until the receipts part is wired in)."""
    return None


def store_receipts(store: Store) -> ReceiptLookup:
    """A lookup over the receipts the plans part stored, each verified offline first.

    Only a ``receipt_sha256`` names a receipt here (a run id does not). The returned lookup
    raises ReceiptInvalid when a stored receipt no longer matches its commitment.
    """

    def lookup(receipt_id: str) -> ReceiptFacts | None:
        try:
            body = load_receipt(store, receipt_id)
        except NotFound:
            return None
        if verify_stored_receipt(store, body) != receipt_id:
            return None
        committed = body.committed
        return ReceiptFacts(
            outcome=committed.outcome,
            snapshot_id=committed.snapshot_id,
            plan_id=committed.plan_id,
            plan_shape=plan_shape(committed.plan),
            signer=receipt_signer(body),
        )

    return lookup


def outcome_from_receipts(oracle_outcomes: Iterable[str]) -> Outcome:
    """``supported``/``refuted`` only when receipts say so and do not contradict each other."""
    seen = set(oracle_outcomes)
    if "supports" in seen and "refutes" not in seen:
        return "supported"
    if "refutes" in seen and "supports" not in seen:
        return "refuted"
    return "unresolved"
