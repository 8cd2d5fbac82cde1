"""The action-cache key covers every input that can change a result (no sandbox needed)."""

from __future__ import annotations

import shutil
from pathlib import Path

from probe_service.plans.models import parse_plan
from probe_service.plans.run import action_inputs, action_key_for
from probe_service.policies import Policy

SNAPSHOT = "a" * 64


def policy(**extra: object) -> Policy:
    return Policy.model_validate(
        {
            "id": "p",
            "allowed_executables": ["true"],
            "timeout_seconds": 5,
            "max_output_bytes": 100,
            "allowed_domains": [],
            "environment": ["PYTHONPATH", "HOME", "TMPDIR", "HTTPS_PROXY", "no_proxy"],
            **extra,
        }
    )


PLAN = parse_plan(
    {
        "snapshot_id": SNAPSHOT,
        "policy_id": "p",
        "executable": "true",
        "oracle": {"check": {"kind": "exit_code", "equals": 0}, "source": "user_requirement",
                   "reference": "issue 10"},
    }
)  # fmt: skip


def key(environ: dict[str, str], pol: Policy | None = None) -> str:
    return action_key_for(action_inputs("plan", PLAN, pol or policy(), "sandbox", environ))


def test_environment_values_are_in_the_key() -> None:
    """Another value of a variable the policy passes is another action."""
    assert key({"PYTHONPATH": "/src"}) != key({"PYTHONPATH": "/src/fixed"})
    assert key({}) != key({"PYTHONPATH": ""})


def test_per_run_variables_are_not_in_the_key() -> None:
    """HOME, TMPDIR and proxy variables are the runner's per-run ones: never keyed."""
    base = {"PYTHONPATH": "/src"}
    noisy = {**base, "HOME": "/x", "TMPDIR": "/t", "HTTPS_PROXY": "http://p", "no_proxy": "*"}
    assert key(base) == key(noisy)


def test_variables_the_policy_does_not_pass_are_not_in_the_key() -> None:
    """The worker's other variables do not reach the sandbox, so they do not key it."""
    assert key({"PYTHONPATH": "/src"}) == key({"PYTHONPATH": "/src", "EDITOR": "vi"})


def test_resolved_executable_path_is_in_the_key(tmp_path: Path) -> None:
    """The same bytes at another resolved path are another action."""
    system = Path(str(shutil.which("true")))
    copy = tmp_path / "true"
    shutil.copy2(system, copy)
    pinned_system = policy(executable_pins={"true": str(system.resolve())})
    pinned_copy = policy(executable_pins={"true": str(copy)})
    inputs = action_inputs("plan", PLAN, pinned_copy, "sandbox", {})
    assert inputs.executable_path == str(copy)
    assert key({}, pinned_system) != key({}, pinned_copy)


def test_toolchains_hook_is_empty_until_toolchains_exist() -> None:
    """Toolchain digests have a place in the key; none are recorded yet."""
    assert action_inputs("plan", PLAN, policy(), "sandbox", {}).toolchains == ()


def test_toolchain_digests_are_in_the_key(tmp_path: Path) -> None:
    """A toolchain whose content changed is another action; an unchanged one is the same."""
    from probe_service.toolchains import resolve_toolchains

    root = tmp_path / "tc"
    (root / "lib").mkdir(parents=True)
    (root / "lib" / "m.py").write_text("A = 1\n")
    pol = policy(toolchains={"tc": str(root)})

    def keyed() -> str:
        inputs = action_inputs("plan", PLAN, pol, "sandbox", {}, resolve_toolchains(pol))
        return action_key_for(inputs)

    first = keyed()
    assert keyed() == first
    (root / "lib" / "m.py").write_text("A = 2\n")
    assert keyed() != first
    assert key({}) != first  # and a policy with no toolchain keys differently again


FIXED = {
    "plan_id": "1" * 64,
    "snapshot_id": "2" * 64,
    "policy_digest": "3" * 64,
    "executable_path": "/usr/bin/python3.11",
    "executable_sha256": "4" * 64,
    "environment": (("LANG", "C.UTF-8"),),
    "sandbox_digest": "5" * 64,
    "toolchains": (("tc", "6" * 64),),
}
#: ``action_key_for`` of FIXED before the decision rules were versioned (computed by that
#: release's code): the rules-1 key every receipt stored then carries.
RULES_1_KEY = "5ebde5370bbefee27577e67c2439550761750d3e30f8070e72a35dd2aaff6752"


def test_the_decision_rules_are_in_the_key() -> None:
    """Every action is keyed with the rules that decide it; other rules, another key."""
    from probe_service.plans.oracle import DECISION_RULES
    from probe_service.plans.run import ActionInputs

    inputs = action_inputs("plan", PLAN, policy(), "sandbox", {})
    assert inputs.decision_rules == DECISION_RULES >= 2
    older = ActionInputs(**{**inputs.model_dump(), "decision_rules": DECISION_RULES - 1})
    assert action_key_for(older) != action_key_for(inputs)


def test_only_the_new_field_changes_the_key() -> None:
    """Without the new field the canonical inputs are byte for byte the old ones, so the
    older key is reproducible (and differs from today's)."""
    from probe_service.canonical import sha256_of_json
    from probe_service.plans.run import ActionInputs

    inputs = ActionInputs(**FIXED)  # type: ignore[arg-type]
    dumped = inputs.model_dump(mode="json")
    assert sha256_of_json({k: v for k, v in dumped.items() if k != "decision_rules"}) == RULES_1_KEY
    assert action_key_for(inputs) != RULES_1_KEY


def test_the_runner_generated_names_are_the_ones_the_runner_sets(tmp_path: Path) -> None:
    """Every name the runner adds to the probe's environment is left out of the key."""
    from probe_service.plans.run import RUNNER_GENERATED
    from probe_service.sandbox.runner import ProbeValues, _probe_env

    class HostView:  # the slot's namespace seen from the host: here, the host's own tree
        def view(self, path: Path) -> Path:
            return path

    values = ProbeValues.of(policy(environment=[]), {}, {})
    env = _probe_env(values, tmp_path, HostView())  # type: ignore[arg-type]
    assert set(env) == RUNNER_GENERATED
    cache_names = {"XDG_CACHE_HOME", "PIP_CACHE_DIR", "npm_config_cache", "MYPY_CACHE_DIR"}
    assert cache_names <= RUNNER_GENERATED
    assert all(
        value.startswith(f"{tmp_path}/") for name, value in env.items()
        if name not in ("BYTE_PROBE_SCRATCH", "PYTHONDONTWRITEBYTECODE")
    )  # fmt: skip
    noisy = {"XDG_CACHE_HOME": "/worker/cache", "PIP_CACHE_DIR": "/var/cache/pip"}
    passing = policy(environment=["XDG_CACHE_HOME", "PIP_CACHE_DIR"])
    assert key({}, passing) == key(noisy, passing)
    passed = _probe_env(ProbeValues.of(passing, noisy, {}), tmp_path, HostView())  # type: ignore[arg-type]
    assert passed["XDG_CACHE_HOME"] == f"{tmp_path}/home/.cache"
