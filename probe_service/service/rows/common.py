"""What the row modules share: the response base model and the id types of requests.

An id field is typed with one of the aliases below: it accepts the full id or a unique
prefix (8 or more hex characters), and the session resolves it to the stored id before
the handler runs, or refuses it naming the field (``service/ids.py``; docs/ARCHITECTURE.md,
"Ids").
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from ..ids import IdKind, IdRef, id_pattern

__all__ = [
    "HEX64",
    "BatchId",
    "ClaimId",
    "Frozen",
    "ObligationId",
    "PlanId",
    "ReceiptId",
    "ReceiptSha256",
    "ReviewId",
    "RunId",
    "SnapshotId",
    "TurnId",
]

HEX64 = r"^[0-9a-f]{64}$"


def _id(kind: IdKind, what: str) -> Any:
    return Field(
        pattern=id_pattern(kind),
        description=f"{what}, or a unique prefix of it (at least 8 hex characters).",
    )


SnapshotId = Annotated[str, _id("snapshot", "A snapshot id (64 hex)"), IdRef("snapshot")]
PlanId = Annotated[str, _id("plan", "A plan id (64 hex)"), IdRef("plan")]
#: A receipt's SHA-256, or the id of the run that wrote it.
ReceiptId = Annotated[str, _id("receipt", "A receipt sha256 or a run id"), IdRef("receipt")]
ReceiptSha256 = Annotated[
    str, _id("receipt_sha256", "A receipt sha256 (64 hex)"), IdRef("receipt_sha256")
]
RunId = Annotated[str, _id("run", "A run id (32 hex)"), IdRef("run")]
BatchId = Annotated[str, _id("batch", "A batch id (32 hex)"), IdRef("batch")]
# Claims and obligations are named ``clm_``/``obl_`` and 32 hex (claims/creation.py,
# claims/obligations.py), not by a content digest.
ClaimId = Annotated[str, _id("claim", "A claim id: clm_ and 32 hex"), IdRef("claim")]
ObligationId = Annotated[
    str, _id("obligation", "An obligation id: obl_ and 32 hex"), IdRef("obligation")
]
#: The id ``turn_begin`` returned (``trn_`` and 32 hex), or a unique prefix of it.
TurnId = Annotated[str, _id("turn", "A turn id: trn_ and 32 hex"), IdRef("turn")]
ReviewId = Annotated[str, _id("review", "A review request id: rev_ and 32 hex"), IdRef("review")]


class Frozen(BaseModel):
    """Base of the response models the rows define."""

    model_config = ConfigDict(frozen=True)
