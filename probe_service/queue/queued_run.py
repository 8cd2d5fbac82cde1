"""One plan run through the queue: submit it as a batch of one and wait for its receipt,
or, when the wait is bounded (``run_or_status``), for at most that long."""

from __future__ import annotations

from collections.abc import Callable

from .. import plans
from ..errors import InfrastructureError, PolicyError
from ..plans import ProbeRunResult
from ..settings import REDIS_URL_ENV
from ..store import Store
from .dispatch import Queue
from .runs import cancel_run
from .status import RunStatus, read_run_status
from .submit import batch_results, submit_plans, wait_batch

__all__ = ["run_or_status", "run_queued", "settled", "submit_one"]


def submit_one(
    store: Store, queue: Queue, plan_id: str, policy_id: str, reuse: bool
) -> tuple[str, str]:
    """Submit ``plan_id`` as a batch of one; return its batch and run ids. Raises NotFound or
    PolicyError (the policy id differs from the plan's) before anything is written."""
    plan = plans.load_plan(store, plan_id)
    if policy_id != plan.policy_id:
        raise PolicyError(
            f"policy: {policy_id!r} does not equal the plan's policy_id {plan.policy_id!r}"
        )
    submitted = submit_plans(store, queue, [plan_id], policy_id, reuse=reuse)
    (run_id,) = submitted.run_ids
    return submitted.batch_id, run_id


def settled(status: RunStatus) -> ProbeRunResult | RunStatus:
    """The run's result once it is done with a receipt, else ``status`` (still queued or
    running). Raises PolicyError when it ended without a receipt (a worker refused it,
    or it was cancelled)."""
    if status.state != "done":
        return status
    if status.result is None:
        raise PolicyError(f"run {status.run_id}: ended without a receipt ({status.reason})")
    return status.result


def run_or_status(
    store: Store,
    queue: Queue,
    plan_id: str,
    policy_id: str,
    *,
    timeout_s: float,
    reuse: bool = True,
    on_progress: Callable[[dict[str, int]], None] | None = None,
) -> ProbeRunResult | RunStatus:
    """Run a plan through the queue and wait at most ``timeout_s`` for its receipt: its
    result when done, else its status with the run id to poll (docs/ARCHITECTURE.md,
    "Asynchronous runs"). The run keeps its place in the queue either way.

    Raises NotFound, PolicyError (policy id differs from the plan's, or the run ended
    without a receipt) or BrokerUnavailable.
    """
    batch_id, run_id = submit_one(store, queue, plan_id, policy_id, reuse)
    wait_batch(store, batch_id, on_progress or (lambda _: None), timeout_s=timeout_s)
    return settled(read_run_status(store, run_id))


def run_queued(
    store: Store,
    queue: Queue,
    plan_id: str,
    policy_id: str,
    *,
    timeout_s: float | None = None,
    reuse: bool = True,
    on_progress: Callable[[dict[str, int]], None] | None = None,
) -> ProbeRunResult:
    """Run a plan through the queue (any worker) and wait for its receipt; with
    ``reuse=False`` the worker executes even when a reusable receipt exists.

    Raises NotFound, PolicyError (policy id differs from the plan's, or the worker could
    not find it), BrokerUnavailable, or InfrastructureError when no worker finished it
    within ``timeout_s`` (a run no worker took by then is cancelled, so it never executes
    after its caller gave up). ``on_progress`` sees the batch counts at each poll.
    """
    batch_id, _ = submit_one(store, queue, plan_id, policy_id, reuse)
    wait_batch(store, batch_id, on_progress or (lambda _: None), timeout_s=timeout_s)
    (run,) = batch_results(store, batch_id)
    if run.state == "queued" and cancel_run(store, run.run_id) == "queued":
        raise InfrastructureError(
            f"run {run.run_id}: no worker took it within {timeout_s}s, so it was cancelled; "
            f"is `byte-probe worker` running on this {REDIS_URL_ENV} and namespace?"
        )
    if run.state != "done":
        raise InfrastructureError(
            f"run {run.run_id}: not finished after {timeout_s}s; is a worker running?"
        )
    if run.receipt_sha256 is None:
        raise PolicyError(f"run {run.run_id}: the worker refused it ({run.reason})")
    # A reused run has no receipt row of its own: the receipt it served is found by its
    # sha (looking it up by this run's id was the "receipt <run_id>: not stored" bug).
    receipt = plans.load_receipt(store, run.receipt_sha256)
    return plans.result_from_receipt(run.run_id, receipt, reused=run.reused)
