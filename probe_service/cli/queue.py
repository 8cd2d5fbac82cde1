"""``byte-probe worker`` and ``byte-probe submit``: the job queue for CI farms."""

from __future__ import annotations

import logging
import os
import sys
import threading
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from ..errors import InvalidInput
from ..queue import (
    DEFAULT_QUEUE,
    REDIS_URL_ENV,
    ProbeQueue,
    RunSummary,
    batch_results,
    read_plans_file,
    resume_batch,
    submit_plans,
    wait_batch,
)
from ..queue.inline import run_inline
from ..queue.junit import write_junit
from ..queue.metrics import METRICS_PORT_ENV, serve_metrics
from ..queue.supervisor import run_supervisor
from ..store import Store
from .common import JsonOption, RootOption, console, emit_json, open_cli_store


class FailOn(StrEnum):
    """Which outcomes make `submit --wait` exit 1."""

    any = "any"
    refutes = "refutes"
    inconclusive = "inconclusive"


def _queue() -> ProbeQueue | None:
    url = os.environ.get(REDIS_URL_ENV)
    return ProbeQueue(url) if url else None


def worker(
    processes: Annotated[int, typer.Option("--processes", min=1, help="Worker processes.")] = 2,
    threads: Annotated[int, typer.Option("--threads", min=1, help="Threads per process.")] = 2,
    queues: Annotated[list[str] | None, typer.Option("--queues", help="Queues to consume.")] = None,
    metrics_port: Annotated[
        int,
        typer.Option("--metrics-port", envvar=METRICS_PORT_ENV, help="Prometheus port; 0 = off."),
    ] = 9191,
    root: RootOption = Path("."),
) -> None:
    """Start dramatiq workers on PROBE_REDIS_URL, restarting any that dies, until Ctrl-C.

    Example: PROBE_REDIS_URL=redis://127.0.0.1:6379/0 byte-probe worker --processes 2
    """
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    queue = _queue()
    if queue is None:
        raise InvalidInput(f"{REDIS_URL_ENV}: not set; a worker needs a Redis broker")
    os.environ.setdefault("PROBE_ROOT", str(root.resolve()))
    if metrics_port:
        serve_metrics(metrics_port, open_cli_store(root), queue)
        console.print(f"metrics on http://0.0.0.0:{metrics_port}/metrics")
    raise typer.Exit(
        run_supervisor(processes, threads, queues or [DEFAULT_QUEUE], threading.Event())
    )


def _gate(results: list[RunSummary], fail_on: FailOn) -> int:
    outcomes = {r.outcome for r in results}
    if fail_on is FailOn.refutes:
        return 1 if "refutes" in outcomes else 0
    if fail_on is FailOn.inconclusive:
        return 1 if outcomes - {"supports", "refutes"} else 0
    return 1 if outcomes - {"supports"} else 0


def _wait_with_progress(store: Store, batch_id: str, total: int, show: bool) -> None:
    if not show:
        wait_batch(store, batch_id, lambda _: None)
        return
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TextColumn("{task.fields[counts]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console) as progress:
        task = progress.add_task("probes", total=total, counts="")

        def update(counts: dict[str, int]) -> None:
            shown = " ".join(
                f"{k}={counts[k]}" for k in ("supports", "refutes", "inconclusive") if k in counts
            )
            progress.update(task, completed=counts.get("done", 0), counts=shown)

        wait_batch(store, batch_id, update)


def submit(
    plans_file: Annotated[
        Path | None, typer.Argument(help="JSONL: one plan or plan id a line.")
    ] = None,
    policy: Annotated[str, typer.Option("--policy", help="Policy id every plan must name.")] = "",
    wait: Annotated[bool, typer.Option("--wait", help="Wait until every run is done.")] = False,
    junit: Annotated[Path | None, typer.Option("--junit", help="Write JUnit XML here.")] = None,
    fail_on: Annotated[
        FailOn, typer.Option("--fail-on", help="Outcomes that exit 1.")
    ] = FailOn.any,
    skip_invalid: Annotated[
        bool, typer.Option("--skip-invalid", help="Submit the valid lines.")
    ] = False,
    resume: Annotated[
        str | None, typer.Option("--resume", help="Re-send a batch's queued runs.")
    ] = None,
    threads: Annotated[int, typer.Option("--threads", min=1, help="Embedded mode threads.")] = 2,
    no_reuse: Annotated[
        bool, typer.Option("--no-reuse", help="Execute even where a reusable receipt exists.")
    ] = False,
    root: RootOption = Path("."),
    json_out: JsonOption = False,
) -> None:
    """Persist and enqueue many plans; with --wait, gate on their outcomes.

    Without PROBE_REDIS_URL the runs execute in this process (embedded mode, implies
    --wait). Exit codes: 0 all passed the --fail-on gate (or not waited), 1 gate failed,
    3 invalid input (nothing enqueued), 4 store or broker unavailable (resume command named).

    Example: byte-probe submit plans.jsonl --policy ci-python --wait --junit probes.xml
    """
    store = open_cli_store(root)
    queue = _queue()
    try:
        _submit(
            store,
            queue,
            plans_file,
            policy,
            wait,
            junit,
            fail_on,
            skip_invalid,
            resume,
            threads,
            json_out,
            reuse=not no_reuse,
        )
    finally:
        # Pooled PostgreSQL connections and the broker's Redis pool would otherwise leak
        # when the CLI runs in-process (tests, embedding); closing is harmless on exit.
        if queue is not None:
            queue.close()
        store.close()


def _submit(
    store: Store,
    queue: ProbeQueue | None,
    plans_file: Path | None,
    policy: str,
    wait: bool,
    junit: Path | None,
    fail_on: FailOn,
    skip_invalid: bool,
    resume: str | None,
    threads: int,
    json_out: bool,
    *,
    reuse: bool = True,
) -> None:
    if resume:
        if queue is None:
            raise InvalidInput(f"--resume needs {REDIS_URL_ENV}")
        batch_id, sent, total = resume, resume_batch(store, queue, resume), 0
    else:
        if plans_file is None or not policy:
            raise InvalidInput("submit: give PLANS_FILE and --policy (or --resume BATCH)")
        items, skipped = read_plans_file(plans_file, policy, skip_invalid)
        for line in skipped:
            sys.stderr.write(f"byte-probe: skipped {line}\n")
        result = submit_plans(store, queue, items, policy, reuse=reuse)
        batch_id, sent, total = result.batch_id, result.enqueued, len(result.run_ids)
        if queue is None:
            wait = True
            run_inline(store, result.run_ids, threads)
    if not json_out:
        console.print(f"batch {batch_id}: {total or ''} runs stored, {sent} enqueued")
    if not wait:
        if json_out:
            emit_json({"batch_id": batch_id, "runs": total, "enqueued": sent})
        return
    _wait_with_progress(store, batch_id, total, show=sys.stdout.isatty() and not json_out)
    results = batch_results(store, batch_id)
    if junit is not None:
        write_junit(junit, batch_id, results)
    code = _gate(results, fail_on)
    if json_out:
        emit_json(
            {
                "batch_id": batch_id,
                "runs": len(results),
                "enqueued": sent,
                "counts": {
                    o: sum(1 for r in results if r.outcome == o)
                    for o in ("supports", "refutes", "inconclusive")
                },
                "reused": sum(1 for r in results if r.reused),
                "results": [r.__dict__ for r in results],
                "gate": "fail" if code else "pass",
            }
        )
    else:
        _print_results(results)
    raise typer.Exit(code)


def _print_results(results: list[RunSummary]) -> None:
    table = Table(title="batch results")
    for column in ("#", "plan", "outcome", "reason", "receipt", "reused"):
        table.add_column(column, no_wrap=column != "plan")
    for r in results[:200]:
        table.add_row(
            str(r.seq),
            r.name[:60],
            r.outcome or r.state,
            r.reason or "",
            (r.receipt_sha256 or "")[:16],
            "yes" if r.reused else "",
        )
    console.print(table)
    if len(results) > 200:
        console.print(f"… {len(results) - 200} more (use --json or --junit for all)")
