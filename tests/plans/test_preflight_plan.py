"""Plans with preflight commands: ids of older plans unchanged, limits, bare names."""

from __future__ import annotations

import pytest

from probe_service.errors import InvalidPlan
from probe_service.plans import parse_plan, plan_id_of

from .conftest import plan_doc

#: A plan, and the id main gave it before preflight existed (computed there).
OLD_PLAN = {
    "snapshot_id": "a" * 64,
    "policy_id": "p",
    "executable": "python3",
    "oracle": {"check": {"kind": "exit_code", "equals": 0}, "source": "model_inferred"},
}
OLD_PLAN_ID = "7ec7809fd7df3df1a3e51a845f04883c5194c35e7e0bed0aa29006d4b0d8cc6d"


def test_a_plan_without_preflight_keeps_its_id() -> None:
    """An older plan keeps the id it had; its canonical JSON has no preflight key."""
    assert plan_id_of(parse_plan(OLD_PLAN)) == OLD_PLAN_ID
    plan = parse_plan(plan_doc())
    assert "preflight" not in plan.canonical()
    assert plan_id_of(plan) == plan_id_of(parse_plan(plan_doc(preflight=[])))


def test_preflight_changes_the_id() -> None:
    """Preflight commands are part of what the plan id commits to."""
    with_preflight = parse_plan(plan_doc(preflight=[["python3", "-c", "import pytest"]]))
    assert plan_id_of(with_preflight) != plan_id_of(parse_plan(plan_doc()))
    assert with_preflight.preflight == (("python3", "-c", "import pytest"),)


@pytest.mark.parametrize(
    ("preflight", "message"),
    [
        ([[]], "preflight"),
        ([["/usr/bin/python3"]], "bare executable name"),
        ([["python3", "a\x00b"]], "preflight.0.1: contains a NUL byte"),
        ([["python3"]] * 9, "preflight: 9 commands exceeds the limit of 8"),
        ([["python3", "x" * 5000]], "preflight.0.1: longer than the 4096-byte limit"),
        ("python3 -c 1", "preflight"),
    ],
)
def test_bad_preflight_is_refused_naming_it(preflight: object, message: str) -> None:
    """Each malformed preflight is refused, naming the field."""
    with pytest.raises(InvalidPlan, match=message):
        parse_plan(plan_doc(preflight=preflight))
