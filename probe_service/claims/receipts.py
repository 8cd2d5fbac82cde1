"""The seam to probe receipts, which another part (plans/receipts) owns.

``ReceiptLookup`` maps a receipt id to the oracle outcome it recorded (``supports``,
``refutes``, ``inconclusive``) or ``None`` when the id is unknown. The claims part only
reads outcomes through it, so a caller cannot assert an outcome its evidence lacks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ..errors import NotFound
from ..plans.persist import load_receipt
from ..plans.receipts import verify_receipt
from ..store import Store
from .records import Outcome

__all__ = ["ReceiptLookup", "no_receipts", "outcome_from_receipts", "store_receipts"]

ReceiptLookup = Callable[[str], str | None]


def no_receipts(receipt: str) -> str | None:
    """A lookup that knows no receipt (until the receipts part is wired in)."""
    return None


def store_receipts(store: Store) -> ReceiptLookup:
    """A lookup over the receipts the plans part stored, each verified offline first.

    Only a ``receipt_sha256`` names a receipt here (a run id does not). The returned lookup
    raises ReceiptInvalid when a stored receipt no longer matches its commitment.
    """

    def lookup(receipt_id: str) -> str | None:
        try:
            body = load_receipt(store, receipt_id)
        except NotFound:
            return None
        if verify_receipt(body) != receipt_id:
            return None
        outcome = body["committed"].get("outcome")
        return outcome if isinstance(outcome, str) else None

    return lookup


def outcome_from_receipts(oracle_outcomes: Iterable[str]) -> Outcome:
    """``supported``/``refuted`` only when receipts say so and do not contradict each other."""
    seen = set(oracle_outcomes)
    if "supports" in seen and "refutes" not in seen:
        return "supported"
    if "refutes" in seen and "supports" not in seen:
        return "refuted"
    return "unresolved"
