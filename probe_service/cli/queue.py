"""``byte-probe worker`` and ``byte-probe submit``: the job queue for CI farms."""

from __future__ import annotations

import logging
import sys
import threading
import time
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from probe_service.errors import InvalidInput
from probe_service.safe_text import untrusted
from probe_service.service import ProbeService
from probe_service.service.adapters import Receipt, RunSummary, parse_receipt, summary_json
from probe_service.settings import REDIS_URL_ENV, read_settings

from .common import EXIT_INFRASTRUCTURE, JsonOption, RootOption, console, emit_json, local_session
from .progress import ProgressLines, summary_line
from .tables import print_table
from .waiting import NoticeOption, NoWorkerNotice, TimeoutOption

#: The worker command's refusal without a broker.
_NO_BROKER = f"{REDIS_URL_ENV}: not set; a worker needs a Redis broker"


class FailOn(StrEnum):
    """Which outcomes make `submit --wait` exit 1."""

    any = "any"
    refutes = "refutes"
    inconclusive = "inconclusive"


def worker(
    processes: Annotated[int, typer.Option("--processes", min=1, help="Worker processes.")] = 2,
    threads: Annotated[
        int | None,
        typer.Option(
            "--threads",
            min=1,
            help="Threads per process.",
            show_default="2 per lane (byte-probe doctor shows it)",
        ),
    ] = None,
    lanes: Annotated[
        int | None,
        typer.Option(
            "--lanes",
            min=1,
            help="Probes a process launches at once.",
            show_default="the usable cores (byte-probe doctor shows it)",
        ),
    ] = None,
    queues: Annotated[list[str] | None, typer.Option("--queues", help="Queues to consume.")] = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            "--metrics-port",
            help="Worker process i serves its own counters on this port + i; 0 = off.",
            show_default="$PROBE_METRICS_PORT, else 9191",
        ),
    ] = None,
    metrics_host: Annotated[
        str, typer.Option("--metrics-host", help="Address the metrics endpoints bind.")
    ] = "127.0.0.1",
    store_metrics_port: Annotated[
        int,
        typer.Option(
            "--store-metrics-port",
            help="Also serve the store-wide metrics here (one endpoint per farm); 0 = off.",
        ),
    ] = 0,
    root: RootOption = Path("."),
) -> None:
    """Start dramatiq workers on PROBE_REDIS_URL, restarting any that dies, until Ctrl-C.

    Example: PROBE_REDIS_URL=redis://127.0.0.1:6379/0 byte-probe worker --processes 2
    """
    # The worker runs the queue's own machinery: it serves the table's runs rather than
    # calling it (docs/ARCHITECTURE.md, "Layers").
    from probe_service.service.farm import (
        DEFAULT_QUEUE,
        WorkerMetrics,
        run_supervisor,
        serve_metrics,
        worker_size,
    )

    # Refused here, once, rather than by every worker process it would start.
    worker_size(threads, lanes)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    settings = read_settings()
    port = settings.metrics_port if metrics_port is None else metrics_port
    # A lazy session: refusing for want of a broker opens no store.
    with local_session(root, settings) as svc:
        queue = svc.queue.require_broker(_NO_BROKER)
        if store_metrics_port:
            serve_metrics(store_metrics_port, svc.store, queue, host=metrics_host)
            where = f"http://{metrics_host}:{store_metrics_port}/metrics"
            console.print(untrusted(f"store-wide metrics on {where}"))
        if port:
            last = port + processes - 1
            where = f"http://{metrics_host}:{port}..{last}/metrics"
            console.print(untrusted(f"worker metrics on {where}"))
        code = run_supervisor(
            processes,
            threads,
            queues or [DEFAULT_QUEUE],
            threading.Event(),
            # The workers get the state directory as an argument, and the settings' copy of
            # the environment (docs/ARCHITECTURE.md, "Settings").
            root=root.resolve(),
            env=settings.environment,
            metrics=WorkerMetrics(port, metrics_host),
            lanes=lanes,
        )
    raise typer.Exit(code)


def metrics(
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port to serve on.")] = 9190,
    host: Annotated[str, typer.Option("--host", help="Address to bind.")] = "127.0.0.1",
    once: Annotated[
        bool, typer.Option("--once", help="Print one scrape to stdout and exit.")
    ] = False,
    root: RootOption = Path("."),
    json_out: JsonOption = False,
) -> None:
    """Serve the farm's store-wide metrics (one endpoint per farm; workers serve their own).

    Runs by state, outcome and reason, attempts, workers alive, the queue depth (with
    PROBE_REDIS_URL) and the duration histograms, read from the store at each scrape.
    --once (or --json) prints one scrape instead.

    Example: byte-probe metrics --port 9190
    """
    from probe_service.service.farm import StoreCollector, exposition, serve_metrics

    with local_session(root) as svc:
        queue = None if svc.queue.embedded else svc.queue.require_broker(_NO_BROKER)
        if json_out:
            emit_json({"metrics": _samples(StoreCollector(svc.store, queue))})
            return
        if once:
            sys.stdout.write(exposition(StoreCollector(svc.store, queue)).decode())
            return
        serve_metrics(port, svc.store, queue, host=host)
        console.print(untrusted(f"store-wide metrics on http://{host}:{port}/metrics"))
        threading.Event().wait()


def _samples(collector: Any) -> list[dict[str, Any]]:
    """Every sample of one scrape as ``{name, labels, value}``."""
    return [
        {"name": s.name, "labels": dict(s.labels), "value": s.value}
        for family in collector.collect()
        for s in family.samples
    ]


def _gate(results: list[RunSummary], fail_on: FailOn) -> int:
    outcomes = {r.outcome for r in results}
    if fail_on is FailOn.refutes:
        return 1 if "refutes" in outcomes else 0
    if fail_on is FailOn.inconclusive:
        return 1 if outcomes - {"supports", "refutes"} else 0
    return 1 if outcomes - {"supports"} else 0


#: The clock of the progress lines (a test replaces it; docs/ARCHITECTURE.md, "CLI output").
progress_clock = time.monotonic


def _wait_with_progress(
    svc: ProbeService,
    batch_id: str,
    total: int,
    show: bool,
    notice: NoWorkerNotice,
    lines: ProgressLines | None = None,
) -> list[RunSummary]:
    if not show:

        def plain(counts: dict[str, int]) -> None:
            notice(counts)
            if lines is not None:
                lines(counts)

        svc.on_progress = plain
        status = svc.batch_wait(batch_id=batch_id, timeout_seconds=notice.timeout_s)
        return list(status.runs)
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
            notice(counts)

        svc.on_progress = update
        status = svc.batch_wait(batch_id=batch_id, timeout_seconds=notice.timeout_s)
        return list(status.runs)


def submit(
    plans_file: Annotated[
        Path | None, typer.Argument(help="JSONL: one plan or plan id a line.")
    ] = None,
    policy: Annotated[
        str,
        typer.Option("--policy", help="Policy id every plan must name (default: each plan's own)."),
    ] = "",
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
    wide: Annotated[bool, typer.Option("--wide", help="Full ids in the results table.")] = False,
    progress_every: Annotated[
        float,
        typer.Option(
            "--progress-every",
            min=0,
            help="Off a terminal, seconds between progress lines while waiting; 0 = none.",
        ),
    ] = 10.0,
    timeout: TimeoutOption = 3600.0,
    notice_after: NoticeOption = 10.0,
    root: RootOption = Path("."),
    json_out: JsonOption = False,
) -> None:
    """Persist and enqueue many plans; with --wait, gate on their outcomes.

    Without PROBE_REDIS_URL the runs execute in this process (embedded mode, implies
    --wait). Exit codes: 0 all passed the --fail-on gate (or not waited), 1 gate failed,
    3 invalid input (nothing enqueued), 4 store or broker unavailable (resume command named).

    Example: byte-probe submit plans.jsonl --policy ci-python --wait --junit probes.xml
    """
    with local_session(root) as svc:
        _submit(
            svc,
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
            wide=wide,
            waiting=(timeout, notice_after, progress_every),
        )


def _submit(
    svc: ProbeService,
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
    wide: bool = False,
    waiting: tuple[float, float, float] = (3600.0, 10.0, 10.0),
) -> None:
    if resume:
        svc.queue.require_broker(f"--resume needs {REDIS_URL_ENV}")
        batch_id, sent, total = resume, svc.batch_resume(batch_id=resume).enqueued, 0
    else:
        if plans_file is None:
            raise InvalidInput("submit: give PLANS_FILE (or --resume BATCH)")
        # Reading the JSONL file is the queue's file format; persisting and enqueueing the
        # batch is the table's `batch_submit` row.
        from probe_service.service.farm import read_plans_file

        items, skipped = read_plans_file(svc, plans_file, policy or None, skip_invalid)
        for line in skipped:
            sys.stderr.write(f"byte-probe: skipped {line}\n")
        result = svc.batch_submit(
            items=tuple(items), policy_id=policy or None, reuse=reuse, threads=threads
        )
        batch_id, sent, total = result.batch_id, result.enqueued, len(result.run_ids)
        wait = wait or result.embedded
    if not json_out:
        console.print(f"batch {batch_id}: {total or ''} runs stored, {sent} enqueued")
    if not wait:
        if json_out:
            emit_json({"batch_id": batch_id, "runs": total, "enqueued": sent})
        return
    what = f"batch {batch_id}"
    notice = NoWorkerNotice(what, waiting[1], waiting[0])
    show = sys.stdout.isatty() and not json_out
    # Off a terminal: plain progress lines, on stderr under --json (stdout is the document).
    log = sys.stderr if json_out else sys.stdout
    lines = ProgressLines(what, total, waiting[2], log, progress_clock)
    results = _wait_with_progress(svc, batch_id, total, show, notice, lines)
    unfinished = sum(1 for r in results if r.state != "done")
    receipts = (
        {
            r.receipt_sha256: parse_receipt(svc.receipt_get(receipt_id=r.receipt_sha256))
            for r in results
            if r.receipt_sha256
        }
        if junit is not None or json_out
        else {}
    )
    if junit is not None:
        from probe_service.service.farm import write_junit  # the queue's JUnit format

        write_junit(svc, junit, batch_id, results, receipts)
    code = gate = _gate(results, fail_on)
    if unfinished:
        sys.stderr.write(
            f"byte-probe: {unfinished} run(s) of batch {batch_id} not finished after "
            f"{waiting[0]:g}s; wait again with `byte-probe submit --resume {batch_id} --wait`\n"
        )
        code = EXIT_INFRASTRUCTURE
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
                "results": [_result_json(r, receipts) for r in results],
                "gate": "fail" if code else "pass",
            }
        )
    else:
        _print_results(results, wide)
    log.write(summary_line(what, results, progress_clock() - lines.started, gate != 0))
    log.flush()
    raise typer.Exit(code)


def _result_json(run: RunSummary, receipts: dict[str, Receipt]) -> dict[str, Any]:
    """One run of the batch: its queue fields and, once it has a receipt, the receipt's
    summary (detail, check, phases, limits applied …) as `run --json` names them."""
    receipt = receipts.get(run.receipt_sha256 or "")
    summary = summary_json(receipt) if receipt is not None else {}
    return {**summary, **run.__dict__}


_MIN_WIDTH = {"outcome": len("inconclusive"), "reason": len("oracle_passed"), "#": 3}


def _print_results(results: list[RunSummary], wide: bool) -> None:
    table = Table(title="batch results")
    columns = ("#", "plan", "outcome", "reason", "receipt", "reused") + (("run",) if wide else ())
    for column in columns:
        # On a narrow terminal the ids fold and the plan wraps; the outcome and reason
        # keep their width, so no column collapses to nothing (`--wide` at 80 columns).
        table.add_column(
            column,
            no_wrap=column not in ("plan", "receipt", "run"),
            overflow="fold",
            min_width=_MIN_WIDTH.get(column),
        )
    for r in results[:200]:
        table.add_row(
            str(r.seq),
            untrusted(r.name[:60]),
            untrusted(r.outcome or r.state),
            untrusted(r.reason or ""),
            (r.receipt_sha256 or "")[: None if wide else 16],
            "yes" if r.reused else "",
            *((r.run_id,) if wide else ()),
        )
    print_table(console, table)
    if len(results) > 200:
        console.print(f"… {len(results) - 200} more (use --json or --junit for all)")


def cancel(
    run_id: Annotated[str, typer.Argument(help="Run id, or a unique prefix of 8+ hex.")],
    root: RootOption = Path("."),
    json_out: JsonOption = False,
) -> None:
    """Cancel a queued run so that no worker executes it; exit 3 if a worker took it.

    Example: byte-probe cancel 3fa85f64
    """
    with local_session(root) as svc:
        full = svc.run_cancel(run_id=run_id).run_id
    if json_out:
        emit_json({"run_id": full, "cancelled": True})
    else:
        console.print(untrusted(f"run {full} cancelled"))


def status(
    run_id: Annotated[str, typer.Argument(help="Run id, or a unique prefix of 8+ hex.")],
    root: RootOption = Path("."),
    json_out: JsonOption = False,
) -> None:
    """Show where a run stands (queued, running, done) and its receipt once done.

    A run `run` or an agent's probe_submit left going is followed here, from any shell
    over the same store. Exit 0 whenever the run was found.

    Example: byte-probe status 3fa85f64 --json
    """
    with local_session(root) as svc:
        found = svc.run_status(run_id=run_id)
    if json_out:
        emit_json(found)
        return
    result = found.result
    if result is None:
        where = f"run {found.run_id}: {found.state}"
        console.print(untrusted(f"{where} ({found.reason})" if found.reason else where))
        console.print(untrusted(found.next))
        return
    from .results import print_receipt

    extra = {"reused": "yes" if result.reused else "no", "reuse": result.reuse.explained()}
    print_receipt(console, result.receipt, f"run {found.run_id}: done", extra)
