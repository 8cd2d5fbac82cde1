"""What a policy allows, as an agent reads it (``policy_describe``).

docs/ARCHITECTURE.md, "Policies": an agent planning a probe needs to know which
executables, limits, network and environment a policy gives it before it writes a plan.
The description names all of them and the policy's digest, but never the policy file's
path, an executable pin's or a toolchain's root: those are the administrator's host layout,
and a plan can use none of them.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field

from ..envnames import RUNNER_OWNED
from .digest import policy_digest
from .model import (
    DEFAULT_JUNIT_MAX_BYTES,
    DEFAULT_JUNIT_MAX_CASES,
    DEFAULT_MAX_OPEN_FILES,
    Policy,
)

__all__ = ["EnvironmentDescription", "PolicyDescription", "describe_policy"]


class EnvironmentDescription(BaseModel):
    """The environment a probe under the policy gets."""

    model_config = ConfigDict(frozen=True)

    fixed: dict[str, str] = Field(description="Names with the value the policy fixes.")
    from_worker: list[str] = Field(
        description="Names passed with the worker's own value (it differs between workers)."
    )
    plan_may_set: list[str] = Field(
        description="Names a plan may set in its 'environment' (they win over the others)."
    )
    runner_sets: list[str] = Field(
        description="Names the runner sets for every run (HOME, TMPDIR, caches, "
        "BYTE_PROBE_SCRATCH); no policy or plan can change them."
    )


class PolicyDescription(BaseModel):
    """One policy as an agent plans against it."""

    model_config = ConfigDict(frozen=True)

    id: str
    digest: str = Field(description="The digest every receipt under this policy records.")
    allowed_executables: list[str] = Field(
        description="Bare names a plan's executable and preflight commands may use."
    )
    pinned_executables: list[str] = Field(
        description="Those of them the administrator pinned to one file."
    )
    timeout_seconds: int
    max_output_bytes: int = Field(description="stdout and stderr together.")
    memory_bytes: int | None
    max_processes: int | None
    scratch_bytes: int | None
    scratch_inodes: int | None
    max_open_files: int
    junit_max_bytes: int = Field(description="Largest junit_xml report the oracle reads.")
    junit_max_cases: int = Field(description="Most test cases one junit_xml report may hold.")
    allowed_domains: list[str] = Field(description="Reachable through the proxy; empty: none.")
    allowed_ports: list[int]
    toolchains: list[str] = Field(description="Toolchain names the probe may read and run.")
    environment: EnvironmentDescription
    confirm_refutes: bool = Field(
        description="Whether a first refutation is executed once more before it is reused."
    )
    trusted_oracle_sources: list[str] = Field(
        description="Oracle sources that can yield supports or refutes; each needs a "
        "non-empty reference. model_inferred always ends inconclusive."
    )


def describe_policy(policy: Policy, trusted_sources: Iterable[str]) -> PolicyDescription:
    """The description of ``policy``: what it allows, without any host path.

    ``trusted_sources`` are the oracle sources that can decide an outcome: the plan model
    owns that rule, above the policies, so the caller hands them in.
    """
    return PolicyDescription(
        id=policy.id,
        digest=policy_digest(policy),
        allowed_executables=list(policy.allowed_executables),
        pinned_executables=sorted(policy.executable_pins),
        timeout_seconds=policy.timeout_seconds,
        max_output_bytes=policy.max_output_bytes,
        memory_bytes=policy.memory_bytes,
        max_processes=policy.max_processes,
        scratch_bytes=policy.scratch_bytes,
        scratch_inodes=policy.scratch_inodes,
        max_open_files=policy.max_open_files or DEFAULT_MAX_OPEN_FILES,
        junit_max_bytes=policy.junit_max_bytes or DEFAULT_JUNIT_MAX_BYTES,
        junit_max_cases=policy.junit_max_cases or DEFAULT_JUNIT_MAX_CASES,
        allowed_domains=list(policy.allowed_domains),
        allowed_ports=list(policy.allowed_ports),
        toolchains=sorted(policy.toolchains),
        environment=EnvironmentDescription(
            fixed=policy.fixed_environment,
            from_worker=list(policy.passthrough_environment),
            plan_may_set=list(policy.plan_environment),
            runner_sets=sorted(RUNNER_OWNED),
        ),
        confirm_refutes=policy.confirm_refutes is not False,
        trusted_oracle_sources=sorted(trusted_sources),
    )
