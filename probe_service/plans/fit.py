"""Whether a plan fits the policy it names, checked when the plan is made.

docs/ARCHITECTURE.md, "Policies": ``probe_plan`` checks a plan against its ``policy_id``
when this service's policy file holds that policy, so what a run would only end
``inconclusive`` for (``executable_not_allowed``, ``environment_not_allowed``) is refused
at plan time, naming the field. The run checks again: the policy a worker reads may differ
from the one the plan was checked against. An oracle source without the reference it needs
is refused by the plan model itself, with or without a policy.
"""

from __future__ import annotations

from ..errors import InvalidPlan
from ..policies import Policy
from ..policies.model import plan_environment_refusal
from .models import Plan

__all__ = ["check_plan_fits"]


def _listed(names: tuple[str, ...]) -> str:
    return ", ".join(names) or "none"


def check_plan_fits(plan: Plan, policy: Policy) -> None:
    """Refuse ``plan`` when ``policy`` would refuse its run: an executable (the probe's or a
    preflight command's) it does not allow, or an environment name it does not let a plan
    set. Raises InvalidPlan naming the field and what the policy allows."""
    allowed = policy.allowed_executables
    if plan.executable not in allowed:
        raise InvalidPlan(
            f"executable: {plan.executable!r} is not allowed by policy {policy.id!r} "
            f"(allowed: {_listed(allowed)})"
        )
    for n, argv in enumerate(plan.preflight):
        if argv[0] not in allowed:
            raise InvalidPlan(
                f"preflight.{n}.0: {argv[0]!r} is not allowed by policy {policy.id!r} "
                f"(allowed: {_listed(allowed)})"
            )
    refusal = plan_environment_refusal(policy, plan.environment)
    if refusal is not None:
        raise InvalidPlan(refusal)
