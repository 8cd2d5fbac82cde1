"""The suite: one test passes, one finds the bug in safe_divide."""

from calc import add, safe_divide


def test_add() -> None:
    assert add(2, 3) == 5


def test_safe_divide_by_zero_is_none() -> None:
    assert safe_divide(1, 0) is None
