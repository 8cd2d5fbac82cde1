"""Where one run stands, and its result once done (``run_status``, and ``probe_run``'s
answer when its bounded wait expires).

docs/ARCHITECTURE.md, "Asynchronous runs": a run lives in the ``runs`` table when it was
submitted (to a broker or to the embedded queue), or only as a receipt when it ran in a
caller's process without a row. ``run_status`` reads either; while a run is queued or
running it says so, with the lease's state, and once done it carries the run's result
(the receipt with the summary every face shows).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import select

from ..errors import NotFound
from ..plans.run import ProbeRunResult
from ..store import Store
from .runs import now_ms
from .tables import runs

__all__ = ["RunStatus", "read_run_status"]

State = Literal["queued", "running", "done"]


class RunStatus(BaseModel):
    """Where one run stands; ``result`` once it is done with a receipt."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    state: State = Field(description="queued, running or done.")
    batch_id: str | None = Field(description="Its batch; none for a run without a queue row.")
    outcome: str | None = Field(description="Once done: supports, refutes or inconclusive.")
    reason: str | None = Field(description="Once done: why (cancelled, a refusal's code, …).")
    receipt_sha256: str | None
    reused: bool | None = Field(description="Whether a stored receipt answered it.")
    lease_expired: bool = Field(
        False,
        description="Running, but nobody renews its lease: the process running it is gone "
        "(a farm's janitor sends it again).",
    )
    result: ProbeRunResult | None = Field(
        None, description="Once done with a receipt: the run's result, receipt included."
    )
    next: str = Field(description="What to do next, in words.")


def _next_step(state: State, lease_expired: bool, has_result: bool) -> str:
    if state == "done":
        return "done" if has_result else "done without a receipt (see reason)"
    if lease_expired:
        return "its worker is gone; a farm's janitor requeues it, then poll run_status again"
    return "poll run_status with this run_id again"


def read_run_status(store: Store, run_id: str) -> RunStatus:
    """The status of ``run_id``: its queue row, else its receipt (a run made in a process
    without a row). Raises NotFound when the store has neither."""
    from .. import plans

    with store.reading() as conn:
        row = conn.execute(select(runs).where(runs.c.run_id == run_id)).first()
    if row is None:
        try:
            receipt = plans.load_receipt(store, run_id)
        except NotFound:
            raise NotFound(f"run_id: run {run_id} is not stored") from None
        made = plans.result_from_receipt(run_id, receipt)
        return RunStatus(
            run_id=run_id,
            state="done",
            batch_id=None,
            outcome=made.outcome,
            reason=made.reason,
            receipt_sha256=made.receipt_sha256,
            reused=False,
            result=made,
            next=_next_step("done", False, True),
        )
    state: State = row.state if row.state in ("queued", "running") else "done"
    expired = state == "running" and (row.lease_expires_ms or 0) < now_ms()
    result: ProbeRunResult | None = None
    if state == "done" and row.receipt_sha256 is not None:
        # A reused run's receipt is the one it served, found by its sha.
        receipt = plans.load_receipt(store, row.receipt_sha256)
        result = plans.result_from_receipt(run_id, receipt, reused=bool(row.reused))
    return RunStatus(
        run_id=run_id,
        state=state,
        batch_id=row.batch_id,
        outcome=row.outcome,
        reason=row.reason,
        receipt_sha256=row.receipt_sha256,
        reused=row.reused,
        lease_expired=expired,
        result=result,
        next=_next_step(state, expired, result is not None),
    )
