"""The environment a plan sets: plan content (so part of its id), never a runner-owned or
loader name in any spelling, and an input of the action key (docs/ARCHITECTURE.md, "Probe
environment")."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from probe_service.envnames import reserved_name
from probe_service.errors import InvalidPlan
from probe_service.plans import check_plan_fits, parse_plan, plan_id_of
from probe_service.plans.run import action_inputs, action_key_for
from probe_service.policies import Policy
from probe_service.sandbox.runner import ProbeValues, Refused

from ..policies.test_environment import RESERVED_SPELLINGS
from .conftest import plan_doc
from .test_preflight_plan import OLD_PLAN, OLD_PLAN_ID


def _policy(**extra: Any) -> Policy:
    return Policy.model_validate(
        {
            "id": "test-policy",
            "allowed_executables": ["python3"],
            "timeout_seconds": 5,
            "max_output_bytes": 100,
            "allowed_domains": [],
            "environment": ["LANG"],
            **extra,
        }
    )


class TestPlanContent:
    def test_a_plan_without_environment_keeps_its_id(self) -> None:
        """A plan of before keeps the id main gave it; an empty environment is the same."""
        assert plan_id_of(parse_plan(OLD_PLAN)) == OLD_PLAN_ID
        assert plan_id_of(parse_plan({**OLD_PLAN, "environment": {}})) == OLD_PLAN_ID
        assert "environment" not in parse_plan(OLD_PLAN).canonical()

    def test_values_are_part_of_the_id(self) -> None:
        """Another value, another plan."""
        one = parse_plan(plan_doc(environment={"PYTHONPATH": "src"}))
        two = parse_plan(plan_doc(environment={"PYTHONPATH": "lib"}))
        assert len({plan_id_of(one), plan_id_of(two), plan_id_of(parse_plan(plan_doc()))}) == 3
        assert one.canonical()["environment"] == {"PYTHONPATH": "src"}

    @pytest.mark.parametrize("name", RESERVED_SPELLINGS)
    def test_a_reserved_name_is_refused_in_any_spelling(self, name: str) -> None:
        """Runner-owned, proxy and loader names, in any case, never enter a plan."""
        with pytest.raises(InvalidPlan, match=r"environment: .*a plan may never set it"):
            parse_plan(plan_doc(environment={name: "/tmp/x"}))

    @pytest.mark.parametrize(
        ("environment", "message"),
        [
            ({"HOME=/tmp/x PATH": "y"}, "not an environment name"),
            ({"A=B": "c"}, "not an environment name"),
            ({"HOME\x00": "x"}, "not an environment name"),
            ({"PATH\x00LD_PRELOAD": "x"}, "not an environment name"),
            ({"A" * 129: "x"}, "not an environment name"),
            ({" HOME": "x"}, "not an environment name"),
            ({"HO\u041cE": "x"}, "not an environment name"),  # a Cyrillic capital EM
            ({"1ABC": "x"}, "not an environment name"),
            ({"": "x"}, "not an environment name"),
            ({"A": "x\x00LD_PRELOAD=/evil.so"}, "environment.A: contains a NUL byte"),
            ({"A": "x" * 4097}, "environment.A: longer than the 4096-byte limit"),
            ({f"V{i}": "x" for i in range(33)}, "33 variables exceeds the limit of 32"),
            ({"A": 1}, "environment.A"),
        ],
    )
    def test_a_malformed_name_or_value_is_refused(
        self, environment: dict[str, Any], message: str
    ) -> None:
        """Names with '=', NUL, spaces, look-alike letters or no room, and values with NUL or
        over the limits are refused naming the field."""
        with pytest.raises(InvalidPlan, match=message):
            parse_plan(plan_doc(environment=environment))

    def test_values_count_in_the_launch_size(self) -> None:
        """The NAME=value words share the launch line's budget with the arguments."""
        args = ["-c", "x" * 4000] + ["y" * 4000] * 15
        parse_plan(plan_doc(args=args))
        big = {f"V{i}": "z" * 4000 for i in range(8)}
        with pytest.raises(InvalidPlan, match=r"args and environment: .* launch limit"):
            parse_plan(plan_doc(args=args, environment=big))

    @given(st.text(min_size=1, max_size=40))
    def test_no_spelling_of_a_name_passes_both_checks_and_is_reserved(self, name: str) -> None:
        """Whatever a plan names: either the model refuses it, or it is not reserved in any
        case (so the runner could never mistake it for one of its own)."""
        try:
            plan = parse_plan(plan_doc(environment={name: "v"}))
        except InvalidPlan:
            return
        (kept,) = plan.environment
        assert reserved_name(kept) is None
        assert reserved_name(kept.upper()) is None
        assert reserved_name(kept.lower()) is None


class TestFitsItsPolicy:
    def test_an_executable_the_policy_does_not_allow(self) -> None:
        """bash under a python3-only policy is refused naming executable and the allowed."""
        with pytest.raises(InvalidPlan, match=r"executable: 'bash' .* \(allowed: python3\)"):
            check_plan_fits(parse_plan(plan_doc(executable="bash")), _policy())

    def test_a_preflight_executable_the_policy_does_not_allow(self) -> None:
        """A preflight command's executable is checked the same way."""
        plan = parse_plan(plan_doc(preflight=[["pip", "list"]]))
        with pytest.raises(InvalidPlan, match=r"preflight\.0\.0: 'pip' is not allowed"):
            check_plan_fits(plan, _policy())

    def test_an_environment_name_the_policy_does_not_list(self) -> None:
        """A name outside plan_environment is refused naming environment.NAME and the list."""
        plan = parse_plan(plan_doc(environment={"PYTHONPATH": "src"}))
        with pytest.raises(InvalidPlan, match=r"environment\.PYTHONPATH: .*plan_environment: none"):
            check_plan_fits(plan, _policy())
        check_plan_fits(plan, _policy(plan_environment=["PYTHONPATH"]))

    def test_an_oracle_source_without_its_reference(self) -> None:
        """A trusted source without a reference is refused by the plan itself, naming it."""
        oracle = {"check": {"kind": "exit_code", "equals": 0}, "source": "user_requirement"}
        with pytest.raises(InvalidPlan, match="oracle: reference: a user_requirement oracle"):
            parse_plan(plan_doc(oracle=oracle))


class TestActionKey:
    def _key(self, policy: Policy, environ: dict[str, str], **plan: Any) -> str:
        parsed = parse_plan(plan_doc(**plan))
        inputs = action_inputs(plan_id_of(parsed), parsed, policy, "sandbox", environ)
        return action_key_for(inputs)

    def test_fixed_values_make_the_key_the_same_on_every_worker(self) -> None:
        """With fixed values only, the worker's own LANG and PATH change nothing."""
        fixed = _policy(environment={"LANG": "C.UTF-8", "PATH": "/usr/bin:/bin"})
        one = self._key(fixed, {"LANG": "de_DE.UTF-8", "PATH": "/home/a/bin:/usr/bin"})
        two = self._key(fixed, {})
        assert one == two
        passing = _policy(environment=["LANG", "PATH"])
        assert self._key(passing, {"LANG": "C"}) != self._key(passing, {"LANG": "de_DE"})

    def test_plan_values_are_keyed(self) -> None:
        """A plan's value is in the action's environment (and its id)."""
        policy = _policy(plan_environment=["PYTHONPATH"])
        parsed = parse_plan(plan_doc(environment={"PYTHONPATH": "src"}))
        inputs = action_inputs(plan_id_of(parsed), parsed, policy, "sandbox", {"LANG": "C"})
        assert inputs.environment == (("LANG", "C"), ("PYTHONPATH", "src"))

    def test_a_plan_value_wins_over_the_policy(self) -> None:
        """Precedence: the plan's value for a listed name over the policy's fixed one."""
        policy = _policy(environment={"LANG": "C.UTF-8"}, plan_environment=["LANG"])
        parsed = parse_plan(plan_doc(environment={"LANG": "C"}))
        inputs = action_inputs(plan_id_of(parsed), parsed, policy, "sandbox", {})
        assert inputs.environment == (("LANG", "C"),)


class TestRunnerRefuses:
    def test_an_unlisted_name_ends_the_run_before_launch(self) -> None:
        """The runner checks again (the policy may have changed since the plan was made)."""
        with pytest.raises(Refused, match=r"environment\.PYTHONPATH") as caught:
            ProbeValues.of(_policy(), {}, {"PYTHONPATH": "src"})
        assert caught.value.reason == "environment_not_allowed"

    def test_a_reserved_name_that_bypassed_the_model_is_refused(self) -> None:
        """A plan row written around the model (a hostile store) cannot set HOME either:
        the runner's own check refuses it even when a policy lists it."""
        listed = _policy().model_copy(update={"plan_environment": ("HOME", "LD_PRELOAD")})
        for name in ("HOME", "LD_PRELOAD"):
            with pytest.raises(Refused, match="a plan may never set it"):
                ProbeValues.of(listed, {}, {name: "/tmp/evil"})
