"""The regex guard refuses patterns that can backtrack catastrophically."""

from __future__ import annotations

import time

import pytest

from probe_service.claims.regex_guard import compile_guarded
from probe_service.errors import InvalidClaim


@pytest.mark.parametrize(
    "pattern",
    ["(a+)+$", "(a*)*b", "(a|aa)*c", r"(\w+\s?)+$", r"(a)\1", "(?=(a+)+)b", "(?:x+y?)+"],
)
def test_catastrophic_shapes_are_refused(pattern: str) -> None:
    """Nested repeats, alternation under a repeat and backreferences are refused."""
    with pytest.raises(InvalidClaim):
        compile_guarded(pattern)


@pytest.mark.parametrize("pattern", [r"parse\(", r"def\s+\w+", "foo|bar", "x{2,5}y", "(?:ab)*"])
def test_ordinary_patterns_compile(pattern: str) -> None:
    """Everyday search patterns are accepted."""
    assert compile_guarded(pattern).pattern == pattern


def test_invalid_regex_is_an_input_error() -> None:
    """A pattern ``re`` cannot parse is InvalidClaim, not re.error."""
    with pytest.raises(InvalidClaim, match="invalid regex"):
        compile_guarded("(unclosed")


def test_accepted_patterns_stay_fast_on_adversarial_lines() -> None:
    """What the guard lets through finishes on a long near-match line: polynomial work
    (about 0.2 CPU seconds here), where catastrophic backtracking would never end."""
    line = "a" * 4000 + "!"
    # This process's CPU seconds, not wall time: load from other processes does not count,
    # so the bound holds on a busy machine (README, "Tests": the suite under load).
    start = time.process_time()
    for pattern in [r"a+b", r"(?:ab)*c", r"\w+\s+\w+$", "a{1,100}b"]:
        assert compile_guarded(pattern).search(line) is None
    assert time.process_time() - start < 5.0
