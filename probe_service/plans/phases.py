"""Per-phase timings of one run, kept in the receipt's operational part.

In the manner of the remote-execution API's executed-action metadata: how long the run
waited in the queue, materialized its snapshot, judged the canary (whose checks run in
the probe's own sandbox, during its start-up), started the sandbox, ran the probe,
evaluated the oracle and assembled its receipt. Operational only: the committed digest
never depends on them (docs/ARCHITECTURE.md, "Phase timings").
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from .receipt_model import Receipt

__all__ = ["PHASES", "PhaseClock", "phase_seconds"]

#: Every phase a receipt may time, in the order a run passes through them.
PHASES: tuple[str, ...] = (
    "queued",
    "materialize",
    "canary",
    "launch",
    "execute",
    "evaluate",
    "write",
)


class PhaseClock:
    """Collects the seconds each phase of one run took (time.monotonic)."""

    def __init__(self, queued_seconds: float | None = None) -> None:
        self.seconds: dict[str, float] = {}
        if queued_seconds is not None:
            self.seconds["queued"] = max(queued_seconds, 0.0)

    @contextmanager
    def timing(self, phase: str) -> Iterator[None]:
        """Add the time spent inside the block to ``phase`` (also when it raises)."""
        started = time.monotonic()
        try:
            yield
        finally:
            self.add(phase, time.monotonic() - started)

    def add(self, phase: str, seconds: float) -> None:
        """Add ``seconds`` to ``phase``; raises ``ValueError`` for a phase not in ``PHASES``."""
        if phase not in PHASES:
            raise ValueError(f"phase: {phase!r} is not one of {', '.join(PHASES)}")
        self.seconds[phase] = self.seconds.get(phase, 0.0) + seconds

    def merge(self, measured: Mapping[str, float]) -> None:
        """Add the phases another part measured (the sandbox runner's canary, launch, execute)."""
        for phase, seconds in measured.items():
            self.add(phase, seconds)

    def as_operational(self) -> dict[str, float]:
        """The phases seen, in ``PHASES`` order, rounded to microseconds."""
        return {p: round(self.seconds[p], 6) for p in PHASES if p in self.seconds}


def phase_seconds(receipt: Receipt) -> dict[str, float]:
    """The phase timings a stored receipt carries, of the known phases."""
    phases = receipt.operational.phases or {}
    return {p: float(v) for p, v in phases.items() if p in PHASES and v >= 0}
