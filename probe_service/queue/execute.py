"""The body of the ``run_probe`` actor, and the janitor that reaps lost runs.

Both are plain functions over a ``WorkerContext`` so the same code runs in a dramatiq
worker process, in-process for the embedded mode, and in tests.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy import Connection

from ..errors import BrokerUnavailable, InfrastructureError, ProbeServiceError
from ..plans import probe_abandon, probe_run, run_configuration
from ..plans.backend import SandboxBackend
from ..plans.confirm import ConfirmationHandedOff, HandOff, ReceiptDraft
from ..plans.execution import RuntimeBackend
from ..plans.persist import plan_from_body
from ..settings import Settings, read_settings
from ..store import Store
from .confirmations import requeue_for_confirmation
from .counters import WorkerCounters
from .heartbeats import another_worker_alive
from .leases import LeaseKeeper
from .runs import (
    claim_run,
    expired_runs,
    finish_run,
    finish_run_in,
    mark_enqueued,
    now_ms,
    requeue_run,
    stale_queued_runs,
)
from .tables import DEFAULT_NAMESPACE
from .take import LeaveToOther, TakenRun, reuse_lookup, take_run

if TYPE_CHECKING:
    from ..plans.receipt_model import Receipt
    from .broker import ProbeQueue

__all__ = ["WorkerContext", "execute_run", "execute_taken", "reap_runs"]

log = logging.getLogger(__name__)

#: How long a run waiting to confirm its refutation is put aside when the worker that
#: refuted first receives it while another worker is alive (docs/ARCHITECTURE.md,
#: "Confirming a refutation"): long enough not to spin, short next to a probe.
CONFIRM_ELSEWHERE_DELAY_MS = 1_000


@dataclass
class WorkerContext:
    """What a worker needs to run probes; passed explicitly, never a global."""

    store: Store
    #: Where this worker's runs execute: the real sandbox unless a test passes another
    #: (docs/ARCHITECTURE.md, "Seams").
    backend: SandboxBackend = field(default_factory=RuntimeBackend)
    #: The settings the worker was started with: its runs' policy file, signing key and
    #: environment come from them (docs/ARCHITECTURE.md, "Settings"). A context built
    #: without them reads them once, here.
    settings: Settings = field(default_factory=read_settings)
    owner: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")
    lease_ms: int = 30_000
    max_attempts: int = 3
    resend_after_ms: int = 300_000
    reuse: bool = True
    #: The queue namespace this worker consumes; it executes and re-sends only runs
    #: submitted to it (docs/ARCHITECTURE.md, "Queue namespaces").
    namespace: str = DEFAULT_NAMESPACE
    #: The queue this worker consumes first: a refutation goes back to it for another
    #: worker to confirm. None in the embedded mode, where a refutation is confirmed in
    #: this process (docs/ARCHITECTURE.md, "Confirming a refutation").
    queue: ProbeQueue | None = None
    #: Called with the store, the run id and this context's owner once a run ended here
    #: (or was found done): a recheck's batch settles when its last run is done
    #: (docs/ARCHITECTURE.md, "Recheck").
    #: Nothing by default: the service hands in what follows (``service/followups.py``);
    #: a context without it leaves a recheck's settling to the next poll.
    after_run: Callable[[Store, str, str], None] = field(default=lambda *_: None)
    #: Threads running runs of this context (the worker's busy-thread gauge counts of).
    threads: int = 1
    #: This worker's own counters (docs/ARCHITECTURE.md, "Metrics").
    counters: WorkerCounters = field(init=False)
    #: Renews the leases of the runs this context is running, from one shared thread.
    leases: LeaseKeeper = field(init=False)

    def __post_init__(self) -> None:
        self.counters = WorkerCounters(self.owner, self.threads)
        self.leases = LeaseKeeper(self.store, self.owner, self.lease_ms, self.counters)


#: What ``execute_run`` returns when the run did not end in this context (nor before).
_NOT_ENDED_HERE = frozenset(
    {"confirm_elsewhere", "unknown_run", "other_namespace", "leased_elsewhere", "lost_race"}
)
#: What ends no run here, for the worker's counters: the above, and a duplicate delivery
#: of a run already done.
_NOT_EXECUTED_HERE = _NOT_ENDED_HERE | {"already_done"}


def execute_run(ctx: WorkerContext, run_id: str) -> str:
    """Take and run one queued run, then let what follows it happen (``after_run``);
    return what happened (for logs and tests).

    The run is taken in one transaction and finished in one (docs/ARCHITECTURE.md, "Lean
    store path"). Raises InfrastructureError (store or broker unavailable) so the actor is
    retried; every other failure ends the run with a recorded reason.
    """
    with ctx.counters.busy():
        try:
            what = _execute(ctx, run_id)
        except InfrastructureError:
            ctx.counters.add("retries")  # the actor raises it back to dramatiq, which retries
            raise
    if what not in _NOT_ENDED_HERE:
        # A duplicate delivery of a done run counts too: the worker that finished it may
        # have died before the run's recheck settled.
        ctx.after_run(ctx.store, run_id, ctx.owner)
    return what


def _execute(ctx: WorkerContext, run_id: str) -> str:
    taking = take_run(
        ctx.store,
        run_id,
        ctx.owner,
        ctx.lease_ms,
        namespace=ctx.namespace,
        leave_to_other=_leave_to_another_worker(ctx),
    )
    if taking.why == "confirm_elsewhere" and ctx.queue is not None:
        _send_again(ctx.store, ctx.queue, run_id, CONFIRM_ELSEWHERE_DELAY_MS)
        return taking.why
    taken = taking.taken
    if taken is None:
        if taking.why == "other_namespace":
            log.warning("run %s: submitted to another queue namespace; refused", run_id)
        return taking.why  # duplicate delivery, another worker or namespace: ack, do nothing
    return _execute_taken(ctx, taken)


def execute_taken(ctx: WorkerContext, taken: TakenRun) -> str:
    """Run a run this worker has taken (``take.take_runs``), then let what follows it
    happen (``after_run``); return what happened. Raises InfrastructureError like
    ``execute_run``."""
    what = _execute_taken(ctx, taken)
    ctx.after_run(ctx.store, taken.run.run_id, ctx.owner)
    return what


def _execute_taken(ctx: WorkerContext, taken: TakenRun) -> str:
    what = _execute_counted(ctx, taken)
    if what == "worker_lost":
        ctx.counters.add("runs_lost")
    elif what not in _NOT_EXECUTED_HERE:
        ctx.counters.add("runs_executed")
    return what


def _execute_counted(ctx: WorkerContext, taken: TakenRun) -> str:
    run = taken.run
    run_id = run.run_id
    if run.attempts > ctx.max_attempts:
        _abandon(ctx, run.run_id, run.plan_id, run.policy_id)
        return "worker_lost"
    if run.attempts > 1 and taken.pending is None:  # a confirmation's is its second by design
        ctx.counters.add("run_reattempts")
    try:
        return _run_claimed(ctx, taken)
    except InfrastructureError:
        raise
    except Exception as exc:  # a defect must still end the run with a receipt
        log.exception("run %s: unexpected error", run_id)
        detail = f"{type(exc).__name__}: {exc}"
        _abandon(ctx, run_id, run.plan_id, run.policy_id, "internal_error", detail)
        return "internal_error"


def _leave_to_another_worker(ctx: WorkerContext) -> LeaveToOther | None:
    """Whether a run waiting to confirm a refutation is put aside, asked while it is taken:
    when this worker refuted first and another worker is alive to confirm it; the delayed
    message comes back to any worker (docs/ARCHITECTURE.md, "Confirming a refutation")."""
    queue = ctx.queue
    if queue is None:
        return None  # the embedded mode confirms in this process
    # Alone on the farm, the worker that refuted confirms it itself.
    return lambda first_worker: first_worker == ctx.owner and _another_worker(ctx, queue)


def _another_worker(ctx: WorkerContext, queue: ProbeQueue) -> bool:
    """Whether another worker consuming ``queue`` is alive (docs/ARCHITECTURE.md,
    "Confirming a refutation": who is alive)."""
    return another_worker_alive(ctx.store, ctx.owner, ctx.namespace, queue.queue_name, ctx.lease_ms)


def _send_again(store: Store, queue: ProbeQueue, run_id: str, delay_ms: int) -> None:
    """Send the run's message again; if the broker is down the janitor re-sends it."""
    try:
        sent = queue.enqueue([run_id], delay_ms)
    except BrokerUnavailable as exc:
        log.warning("run %s: not sent again (%s); the janitor will re-send it", run_id, exc)
        return
    if sent:
        mark_enqueued(store, [run_id])


def _hand_off(ctx: WorkerContext, run_id: str) -> HandOff | None:
    """Where a first refutation of ``run_id`` is confirmed: on another worker when one is
    alive (the run goes back to the queue with it), else here, now."""
    queue = ctx.queue
    if queue is None:
        return None

    def hand_off(draft: ReceiptDraft) -> bool:
        if not _another_worker(ctx, queue):
            return False
        if requeue_for_confirmation(ctx.store, run_id, ctx.owner, draft):
            _send_again(ctx.store, queue, run_id, 0)
        else:  # the lease expired and the run went to another worker, which runs it anew
            log.warning("run %s: lease lost before its refutation was handed off", run_id)
        return True

    return hand_off


def _run_claimed(ctx: WorkerContext, taken: TakenRun) -> str:
    """Run a taken run under its lease (the confirmation of its pending refutation when it
    waits for one); return its outcome or the refusal's code."""
    run, pending = taken.run, taken.pending
    run_id = run.run_id
    finished_with_receipt = []
    queued_seconds = run.queued_seconds
    if pending is not None:  # the confirmation's wait starts when the run was queued again
        queued_seconds = max(now_ms() - pending.created_ms, 0) / 1000

    def finish_in_receipt_transaction(conn: Connection, receipt: Receipt) -> None:
        committed = receipt.committed
        finished_with_receipt.append(
            finish_run_in(
                conn,
                run_id,
                outcome=committed.outcome,
                reason=committed.reason,
                receipt_sha256=receipt.receipt_sha256,
                action_key=committed.action_key or None,
                reused=False,
            )
        )

    with ctx.leases.holding(run_id):
        try:
            setup = run_configuration(ctx.settings, ctx.store)
            result = probe_run(
                ctx.store,
                run.plan_id,
                run.policy_id,
                plan=plan_from_body(run.plan_id, taken.plan_body),
                find_reusable=reuse_lookup(ctx.store, taken),
                policy_file=setup.policy_file,
                environ=setup.environ,
                backend=ctx.backend,
                sandbox_dir=ctx.settings.sandbox_dir,
                reuse=ctx.reuse and run.reuse,
                run_id=run_id,
                worker=ctx.owner,
                signing_key=setup.signing_key,
                queued_seconds=queued_seconds,
                on_written=finish_in_receipt_transaction,
                hand_off=_hand_off(ctx, run_id),
                first=None if pending is None else pending.draft,
            )
        except ConfirmationHandedOff:
            return "confirm_elsewhere"
        except InfrastructureError:
            raise
        except ProbeServiceError as exc:
            finish_run(
                ctx.store,
                run_id,
                outcome="inconclusive",
                reason=exc.code,
                receipt_sha256=None,
                action_key=None,
            )
            return exc.code
    if finished_with_receipt:  # marked done in the receipt's own transaction
        return result.outcome
    finish_run(
        ctx.store,
        run_id,
        outcome=result.outcome,
        reason=result.reason,
        receipt_sha256=result.receipt_sha256,
        action_key=result.receipt.committed.action_key or None,
        reused=result.reused,
    )
    return result.outcome


def _abandon(
    ctx: WorkerContext,
    run_id: str,
    plan_id: str,
    policy_id: str,
    reason: str = "worker_lost",
    detail: str = "",
) -> None:
    """End a run that never completed with an inconclusive receipt (``worker_lost`` by default)."""
    detail = detail or f"worker lost {ctx.max_attempts} times"
    try:
        setup = run_configuration(ctx.settings, ctx.store)
        result = probe_abandon(
            ctx.store,
            plan_id,
            policy_id,
            policy_file=setup.policy_file,
            run_id=run_id,
            reason=reason,
            detail=detail,
            worker=ctx.owner,
            signing_key=setup.signing_key,
        )
    except InfrastructureError:
        raise
    except ProbeServiceError:
        finish_run(
            ctx.store,
            run_id,
            outcome="inconclusive",
            reason=reason,
            receipt_sha256=None,
            action_key=None,
        )
        return
    finish_run(
        ctx.store,
        run_id,
        outcome="inconclusive",
        reason=reason,
        receipt_sha256=result.receipt_sha256,
        action_key=None,
    )


def reap_runs(ctx: WorkerContext, enqueue: Callable[[Sequence[str]], int]) -> dict[str, int]:
    """Requeue runs whose lease expired, abandon those out of attempts, resend stale ones;
    only runs of the context's queue namespace are touched."""
    counts = {"requeued": 0, "abandoned": 0, "resent": 0}
    for run in expired_runs(ctx.store, ctx.namespace):
        if run.attempts >= ctx.max_attempts:
            claim = claim_run(
                ctx.store,
                run.run_id,
                ctx.owner,
                ctx.lease_ms,
                count_attempt=False,
                namespace=ctx.namespace,
            )
            if claim.run is not None:
                _abandon(ctx, run.run_id, run.plan_id, run.policy_id)
                ctx.after_run(ctx.store, run.run_id, ctx.owner)
                counts["abandoned"] += 1
                ctx.counters.add("runs_lost")
        elif requeue_run(ctx.store, run.run_id):
            enqueue([run.run_id])
            mark_enqueued(ctx.store, [run.run_id])
            counts["requeued"] += 1
            ctx.counters.add("requeues")
    stale = stale_queued_runs(ctx.store, ctx.namespace, ctx.resend_after_ms)
    if stale:
        sent = enqueue(stale)
        mark_enqueued(ctx.store, stale[:sent])
        counts["resent"] = sent
        ctx.counters.add("resends", sent)
    return counts
