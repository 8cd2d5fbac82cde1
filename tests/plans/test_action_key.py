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
