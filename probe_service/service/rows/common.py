"""What the row modules share: the response base model and the id patterns of requests."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["CLAIM", "HEX64", "ClaimId", "Frozen", "Id", "ObligationId"]

HEX64 = r"^[0-9a-f]{64}$"
Id = Field(pattern=HEX64, description="A full 64-hex id (machine faces take full ids).")
# Claims and obligations are named ``clm_``/``obl_`` and 32 hex (claims/creation.py,
# claims/obligations.py), not by a content digest.
CLAIM = r"^clm_[0-9a-f]{32}$"
ClaimId = Field(pattern=CLAIM, description="A full claim id: clm_ and 32 hex.")
ObligationId = Field(pattern=r"^obl_[0-9a-f]{32}$", description="obl_ and 32 hex.")


class Frozen(BaseModel):
    """Base of the response models the rows define."""

    model_config = ConfigDict(frozen=True)
