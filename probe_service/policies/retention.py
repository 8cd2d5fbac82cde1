"""How long the store keeps what it records, and the floors below which no retention goes.

docs/ARCHITECTURE.md, "Retention and gc": retention is per store, so it is a file-level
key of the policy file (schema 3), never a policy's own: no policy digest changes. Each
kind left out is kept forever. ``byte-probe gc`` removes an object only when it is older
than its kind's retention *and* than the grace period, and no root (a live claim, an open
obligation, a pending review, the newest receipt of an action key in use) reaches it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ..canonical import sha256_of_json

__all__ = [
    "MAX_RETENTION_DAYS",
    "MIN_GRACE_MINUTES",
    "MIN_RETENTION_DAYS",
    "MIN_WARM_CACHE_BYTES",
    "RETAINED_KINDS",
    "Retention",
    "retention_digest",
]

#: The floor of every kind's retention: a day, so an object a writer created this session
#: is never a candidate whatever the file says.
MIN_RETENTION_DAYS = 1
#: About a century: a larger number is a typo, not a policy.
MAX_RETENTION_DAYS = 36_500
#: The floor of the grace period: a writer's window between reading an object and
#: committing its reference (a capture, a plan) must fit inside it (docs/ARCHITECTURE.md,
#: "Retention and gc", touches).
MIN_GRACE_MINUTES = 30

#: The smallest bound of a worker's warm snapshot cache: one ordinary snapshot.
MIN_WARM_CACHE_BYTES = 16 << 20

#: The kinds a retention names, in the order ``gc`` sweeps them.
#: An envelope goes with its receipt; ``envelopes_days`` shorter than ``receipts_days``
#: drops the signatures of old receipts no root reaches, keeping the receipts.
RETAINED_KINDS = ("runs", "receipts", "envelopes", "plans", "snapshots", "blobs", "events")

_Days = Field(
    None,
    ge=MIN_RETENTION_DAYS,
    le=MAX_RETENTION_DAYS,
    description=f"Days kept (at least {MIN_RETENTION_DAYS}); left out: kept forever.",
)


class Retention(BaseModel):
    """The policy file's ``retention`` object (schema 3)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    runs_days: int | None = _Days
    receipts_days: int | None = _Days
    envelopes_days: int | None = _Days
    plans_days: int | None = _Days
    snapshots_days: int | None = _Days
    blobs_days: int | None = _Days
    events_days: int | None = _Days
    grace_minutes: int = Field(
        60,
        ge=MIN_GRACE_MINUTES,
        le=24 * 60,
        description="Nothing younger than this is removed, whatever its kind's retention.",
    )
    batch_rows: int = Field(
        500, ge=1, le=10_000, description="Most objects one gc transaction removes."
    )
    warm_cache_bytes: int | None = Field(
        None,
        ge=MIN_WARM_CACHE_BYTES,
        description="Bound of each worker's warm snapshot cache, least recently used "
        "evicted first (default 512 MiB).",
    )

    def days(self, kind: str) -> int | None:
        """The retention of ``kind`` (one of RETAINED_KINDS) in days, None for forever."""
        value: int | None = getattr(self, f"{kind}_days")
        return value


def retention_digest(retention: Retention) -> str:
    """The hex SHA-256 of the retention's canonical JSON: the policy a tombstone names."""
    return sha256_of_json(retention.model_dump(mode="json"))
