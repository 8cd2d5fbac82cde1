import pytest

import tinyver


def test_numeric_not_lexical() -> None:
    assert tinyver.newer("1.10", "1.9")


def test_equal_is_not_newer() -> None:
    assert not tinyver.newer("2.0.1", "2.0.1")


def test_garbage_is_refused() -> None:
    with pytest.raises(ValueError):
        tinyver.parse("1.x")
