"""`submit --wait` off a terminal: a progress line every N seconds, and a summary line.

docs/ARCHITECTURE.md, "CLI output": a CI log shows no progress bar, so a waiting
``submit`` writes one plain line per ``--progress-every`` seconds (the batch's counts by
state and outcome, and the time waited) and, at the end, one summary line with the
counts. The clock is injected, so a test drives the interval without waiting.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TextIO

from probe_service.service.adapters import RunSummary

__all__ = ["OUTCOMES", "ProgressLines", "summary_line"]

OUTCOMES = ("supports", "refutes", "inconclusive")

Clock = Callable[[], float]


def _outcomes(counts: dict[str, int]) -> str:
    return ", ".join(f"{counts.get(k, 0)} {k}" for k in OUTCOMES)


class ProgressLines:
    """A ``batch_wait`` progress callback: one line on ``stream`` each time ``every_s``
    seconds of ``clock`` have passed since the last (none when ``every_s`` is 0)."""

    def __init__(
        self,
        what: str,
        total: int,
        every_s: float,
        stream: TextIO,
        clock: Clock = time.monotonic,
    ) -> None:
        self.what, self.total, self.every_s, self.stream, self.clock = (
            what,
            total,
            every_s,
            stream,
            clock,
        )
        self.started = clock()
        self.next_at = self.started + every_s

    def __call__(self, counts: dict[str, int]) -> None:
        """Write a line if the interval has passed (one line however many passed)."""
        now = self.clock()
        if self.every_s <= 0 or now < self.next_at:
            return
        self.next_at = now + self.every_s
        done = counts.get("done", 0)
        total = self.total or sum(counts.get(k, 0) for k in ("queued", "running", "done"))
        self.stream.write(
            f"byte-probe: {self.what}: {done}/{total} done ({_outcomes(counts)}), "
            f"{counts.get('running', 0)} running, {counts.get('queued', 0)} queued, "
            f"{now - self.started:.0f}s\n"
        )
        self.stream.flush()


def summary_line(
    what: str, results: Sequence[RunSummary], seconds: float, gate_failed: bool
) -> str:
    """The one line that ends a waited batch: its counts, unfinished, reused, the time
    waited and the gate."""
    counts = {k: sum(1 for r in results if r.outcome == k) for k in OUTCOMES}
    unfinished = sum(1 for r in results if r.state != "done")
    reused = sum(1 for r in results if r.reused)
    return (
        f"byte-probe: {what}: {len(results)} runs: {_outcomes(counts)}, "
        f"{unfinished} unfinished, {reused} reused; {seconds:.0f}s; "
        f"gate {'fail' if gate_failed else 'pass'}\n"
    )
