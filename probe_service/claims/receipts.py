"""The seam to probe receipts, which another part (plans/receipts) owns.

``ReceiptLookup`` maps a receipt id to the oracle outcome it recorded (``supports``,
``refutes``, ``inconclusive``) or ``None`` when the id is unknown. The claims part only
reads outcomes through it, so a caller cannot assert an outcome its evidence lacks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .records import Outcome

__all__ = ["ReceiptLookup", "no_receipts", "outcome_from_receipts"]

ReceiptLookup = Callable[[str], str | None]


def no_receipts(receipt: str) -> str | None:
    """A lookup that knows no receipt (until the receipts part is wired in)."""
    return None


def outcome_from_receipts(oracle_outcomes: Iterable[str]) -> Outcome:
    """``supported``/``refuted`` only when receipts say so and do not contradict each other."""
    seen = set(oracle_outcomes)
    if "supports" in seen and "refutes" not in seen:
        return "supported"
    if "refutes" in seen and "supports" not in seen:
        return "refuted"
    return "unresolved"
