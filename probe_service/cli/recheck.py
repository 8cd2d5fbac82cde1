"""``byte-probe recheck``: rerun the evidence behind open obligations and wait for it.

One ``obligation_recheck`` call queues the reruns (on the farm when PROBE_REDIS_URL is
set, else in this process), ``batch_wait`` waits with progress on stderr, and the batch's
status settles the recheck (docs/ARCHITECTURE.md, "Recheck"). Exit 0 when every
obligation was resolved, 1 when one stays open (a rerun disagreed, or its claim needs a
person or an agent), 3 when refused, 4 when the runs did not finish in time.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from probe_service.safe_text import safe_line
from probe_service.service.adapters import batches_under_way

from .common import EXIT_INFRASTRUCTURE, JsonOption, RootOption, local_session
from .waiting import NoticeOption, NoWorkerNotice, TimeoutOption

if TYPE_CHECKING:
    from probe_service.service import ProbeService
    from probe_service.service.adapters import RecheckEntry, RecheckReport

__all__ = ["recheck"]

EXIT_STILL_OPEN = 1

_STATUS_WORDS = {
    "rechecked": "rechecked",
    "disagreed": "still open: a rerun disagreed",
    "needs_person": "still open: needs a person or an agent",
    "under_way": "under way in an earlier recheck",
    "already_resolved": "already resolved",
    "queued": "not finished",
}


def recheck(
    snapshot: Annotated[str, typer.Option("--snapshot", help="Snapshot the obligations are on.")],
    scope: Annotated[
        str | None, typer.Option("--scope", help="Only obligations of this project key.")
    ] = None,
    obligation: Annotated[
        list[str] | None,
        typer.Option("--obligation", help="Only this open obligation (repeatable)."),
    ] = None,
    no_reuse: Annotated[
        bool, typer.Option("--no-reuse", help="Execute every rerun, even one already stored.")
    ] = False,
    timeout: TimeoutOption = 3600.0,
    notice_after: NoticeOption = 10.0,
    as_json: JsonOption = False,
    root: RootOption = Path("."),
) -> None:
    """Rerun the evidence of every open obligation on a snapshot (in --scope, or those
    named), wait with progress, and resolve each one whose reruns all agree.

    Each rerun is the claim's own probe (the plan of a receipt it rests on, or a plan it
    declares) with only the snapshot changed, under the same policy. A claim with nothing
    to rerun is listed as needing a person or an agent, with what it rests on. Exit 0 when
    every obligation is resolved, 1 when one stays open, 3 when refused (nothing written),
    4 when the runs did not finish within --timeout.

    Example: byte-probe recheck --snapshot 3fa4c2d1 --scope payments
    """
    with local_session(root) as svc:
        started = svc.obligation_recheck(
            snapshot_id=snapshot,
            scope=scope,
            obligation_ids=tuple(obligation or ()),
            reuse=not no_reuse,
        )
        report = _wait(svc, started, timeout, notice_after)
    if as_json:
        typer.echo(json.dumps(report.model_dump(mode="json"), indent=2, sort_keys=True))
    else:
        typer.echo(render_recheck_text(report))
    if not report.settled:
        sys.stderr.write(
            f"byte-probe: the recheck's runs did not all finish within {timeout:g}s; run "
            "the same command again: it waits for them (batch "
            f"{' '.join(filter(None, [report.batch_id, *batches_under_way(report)]))})\n"
        )
        raise typer.Exit(EXIT_INFRASTRUCTURE)
    if any(entry.status != "rechecked" for entry in report.entries):
        raise typer.Exit(EXIT_STILL_OPEN)


def _wait(
    svc: ProbeService, started: RecheckReport, timeout: float, notice_after: float
) -> RecheckReport:
    """The report once its batch — and the batches of earlier rechecks it found under
    way — settled (or the timeout passed): each batch's entries in place of the queued
    and under-way ones."""
    batches = [started.batch_id] if started.batch_id else []
    batches += batches_under_way(started)
    deadline = time.monotonic() + timeout
    settled: dict[str, RecheckEntry] = {}
    all_settled = True
    for batch_id in batches:
        total = len(svc.batch_status(batch_id=batch_id).runs)
        left = max(deadline - time.monotonic(), 0.0)
        svc.on_progress = _Progress(
            total, NoWorkerNotice(f"recheck {batch_id}", notice_after, timeout)
        )
        batch = svc.batch_wait(batch_id=batch_id, timeout_seconds=left).recheck
        if batch is None:  # not a recheck's batch: cannot happen for these ids
            continue
        all_settled = all_settled and batch.settled
        settled.update({entry.obligation_id: entry for entry in batch.entries})
    entries = tuple(settled.get(e.obligation_id, e) for e in started.entries)
    counts: dict[str, int] = {}
    for entry in entries:
        counts[entry.status] = counts.get(entry.status, 0) + 1
    return started.model_copy(update={"entries": entries, "counts": counts, "settled": all_settled})


class _Progress:
    """One stderr line each time more reruns are done (CI logs read it as it comes)."""

    def __init__(self, total: int, notice: NoWorkerNotice) -> None:
        self.total, self.notice, self.done = total, notice, -1

    def __call__(self, counts: dict[str, int]) -> None:
        self.notice(counts)
        done = counts.get("done", 0)
        if done != self.done:
            self.done = done
            shown = " ".join(
                f"{k}={counts[k]}" for k in ("supports", "refutes", "inconclusive") if k in counts
            )
            sys.stderr.write(f"recheck: {done}/{self.total} rerun(s) done {shown}".rstrip() + "\n")
            sys.stderr.flush()


def render_recheck_text(report: RecheckReport) -> str:
    """The recheck's report as lines of plain text; hostile text shown as data."""
    counted = ", ".join(f"{n} {status}" for status, n in sorted(report.counts.items()))
    where = f", scope {report.scope}" if report.scope else ""
    lines = [
        safe_line(
            f"recheck of {len(report.entries)} obligation(s) on snapshot {report.snapshot_id}"
            f"{where}: {counted or 'none open'}"
        )
    ]
    if not report.entries:
        lines.append("nothing to recheck: every live claim in scope is current on this snapshot")
    for entry in report.entries:
        lines.append(
            safe_line(f"{entry.obligation_id} {_STATUS_WORDS[entry.status]}: {entry.statement}")
        )
        lines.append(safe_line(f"  claim {entry.claim_id} [{entry.scope}] {entry.claim_outcome}"))
        for rerun in entry.reruns:
            got = rerun.outcome or rerun.state
            receipt = f" receipt {rerun.receipt_sha256}" if rerun.receipt_sha256 else ""
            verdict = ""
            if rerun.agrees is not None:
                verdict = ", agrees" if rerun.agrees else ", does not agree"
            lines.append(
                safe_line(
                    f"  rerun of {rerun.evidence_kind} {rerun.evidence[:12]} as plan "
                    f"{rerun.plan_id[:12]}: {got}{receipt}{verdict}"
                )
            )
            if rerun.agrees is False and rerun.why:
                lines.append(safe_line(f"    {rerun.why}"))
        lines += [safe_line(f"  skipped: {why}") for why in entry.skipped]
        lines += [safe_line(f"  rests on: {what}") for what in entry.rests_on]
        if entry.status != "rechecked":
            lines.append(safe_line(f"  next: {entry.next}"))
    return "\n".join(lines)
