"""Rows over plans: persist one, read one, run one (here or through the queue)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from ... import plans, snapshot
from ...plans.models import Plan, parse_plan
from ...settings import REDIS_URL_ENV
from ..registry import AGENT, WEB, Request, operation
from ..session import ProbeService
from .common import Frozen, PlanId

__all__: list[str] = []


class ProbePlanRequest(Request):
    plan: Plan = Field(description="The plan: snapshot, policy id, argv, oracle, interventions.")

    @field_validator("plan", mode="before")
    @classmethod
    def _parse(cls, value: object) -> Plan:
        # parse_plan raises InvalidPlan naming the field, which pydantic passes through.
        return value if isinstance(value, Plan) else parse_plan(value)


class PlanCreated(Frozen):
    """The id of a persisted plan; ``created`` is false when it was already stored."""

    plan_id: str
    created: bool


@operation("probe_plan")
def probe_plan(svc: ProbeService, req: ProbePlanRequest) -> PlanCreated:
    """Persist an immutable experiment plan and return its id. Never executes anything
    and never reads a policy: the plan only names the policy it must run under. Refuses a
    plan whose snapshot is not stored, and names the first bad field."""
    plan = parse_plan(req.plan.canonical())
    snapshot.load_snapshot(svc.store, plan.snapshot_id)
    plan_id, created = plans.save_plan(svc.store, plan)
    return PlanCreated(plan_id=plan_id, created=created)


class ProbeGetRequest(Request):
    plan_id: PlanId


class StoredPlan(Frozen):
    plan_id: str
    plan: dict[str, Any]


@operation("probe_get", faces=AGENT | WEB)
def probe_get(svc: ProbeService, req: ProbeGetRequest) -> StoredPlan:
    """Read a stored plan by its id (or a unique prefix of it)."""
    plan = plans.load_plan(svc.store, req.plan_id)
    return StoredPlan(plan_id=req.plan_id, plan=plan.canonical())


class ProbeRunRequest(Request):
    plan_id: PlanId
    policy_id: str = Field(
        min_length=1,
        max_length=128,
        description="The id of an administrator policy; it must equal the plan's policy_id. "
        "A policy is never accepted as a body or a path.",
    )
    reuse: bool = Field(True, description="Serve a stored receipt of the identical action.")
    via: Literal["auto", "embedded", "queue"] = Field(
        "auto", description="auto: the queue when one is configured, else in this process."
    )
    wait_seconds: float = Field(
        3600.0, gt=0, le=86_400, description="How long to wait for a queued run's worker."
    )


@operation("probe_run", long_running=True)
def probe_run(svc: ProbeService, req: ProbeRunRequest) -> plans.ProbeRunResult:
    """Run a stored plan in the sandbox under the administrator policy with exactly that
    id, and return the oracle outcome (supports, refutes, inconclusive with a reason) and
    the signed or unsigned receipt. Every prerequisite failure ends inconclusive; nothing
    ever runs unsandboxed. A queued run no worker took within wait_seconds is cancelled."""
    from ...queue import InlineQueue, Queue

    queue: Queue
    if req.via == "embedded":
        queue = InlineQueue(svc.settings, svc.backend)
    elif req.via == "queue":
        refusal = f"via: queue asked for, but no {REDIS_URL_ENV} is configured"
        queue = svc.queue.require_broker(refusal)
    else:
        queue = svc.queue
    return queue.run_plan(
        svc.store,
        req.plan_id,
        req.policy_id,
        reuse=req.reuse,
        timeout_s=req.wait_seconds,
        on_progress=svc.on_progress,
    )
