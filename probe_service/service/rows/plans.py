"""Rows over plans: persist one, read one, run one (here or through the queue), follow a run."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator

from ... import plans, snapshot
from ... import queue as queues
from ...errors import PolicyError
from ...plans.models import Plan, parse_plan
from ...settings import REDIS_URL_ENV
from ..registry import AGENT, WEB, Request, operation
from ..session import ProbeService
from .common import Frozen, PlanId, RunId

if TYPE_CHECKING:
    from ...policies import Policy
    from ...queue import Queue

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
    #: Whether the plan was checked against its policy here (false: this service's policy
    #: file does not hold that policy id; the run checks the policy a worker reads).
    policy_checked: bool = False


@operation("probe_plan")
def probe_plan(svc: ProbeService, req: ProbePlanRequest) -> PlanCreated:
    """Persist an immutable experiment plan and return its id. Never executes anything.
    When the administrator's policy file holds the plan's policy_id, the plan is checked
    against it first (policy_checked): an executable it does not allow or an environment
    name it does not let a plan set is refused naming the field, and nothing is written.
    Refuses a plan whose snapshot is not stored, and names the first bad field."""
    plan = parse_plan(req.plan.canonical())
    policy = _policy_of(svc, plan.policy_id)
    if policy is not None:
        plans.check_plan_fits(plan, policy)
    snapshot.load_snapshot(svc.store, plan.snapshot_id)
    plan_id, created = plans.save_plan(svc.store, plan)
    return PlanCreated(plan_id=plan_id, created=created, policy_checked=policy is not None)


def _policy_of(svc: ProbeService, policy_id: str) -> Policy | None:
    """The session's policy ``policy_id``, or None when its file does not hold it (no
    file, a file the run would refuse, another id): the run is where that is refused."""
    from ... import policies

    try:
        found = policies.load_policy_file(svc.policy_file)
    except PolicyError:
        return None
    return next((p for p in found.policies if p.id == policy_id), None)


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


#: How long ``probe_run`` waits by default before answering with the run's status.
DEFAULT_WAIT_SECONDS = 60.0


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
    wait_seconds: float | None = Field(
        DEFAULT_WAIT_SECONDS,
        ge=0,
        le=86_400,
        description="Wait at most this long for the result; when the run is not done by "
        "then the answer is its status (state queued or running) with the run_id to poll "
        "with run_status, and the run goes on. 0: answer with the status at once; null: "
        "wait until it is done.",
        examples=[60],
    )


@operation("probe_run", long_running=True)
def probe_run(svc: ProbeService, req: ProbeRunRequest) -> plans.ProbeRunResult | queues.RunStatus:
    """Run a stored plan in the sandbox under the administrator policy with exactly that
    id. It returns the oracle outcome (supports, refutes, inconclusive with a reason), the
    signed or unsigned receipt, and reuse (why a stored receipt did or did not answer).
    Waits at most wait_seconds (60 by default): a run not done by then is answered with
    its status and run_id (poll run_status) and keeps going. Every prerequisite failure
    ends inconclusive; nothing ever runs unsandboxed."""
    queue: Queue
    if req.via == "embedded":
        queue = svc.embedded_queue
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


class RunStatusRequest(Request):
    run_id: RunId


@operation("run_status", faces=AGENT | WEB)
def run_status(svc: ProbeService, req: RunStatusRequest) -> queues.RunStatus:
    """Where a run stands (queued, running, done) and, once done, its result with the
    receipt: poll it with the run_id probe_run or probe_submit returned. Read-only;
    refuses a run id that is not stored."""
    return queues.read_run_status(svc.store, req.run_id)
