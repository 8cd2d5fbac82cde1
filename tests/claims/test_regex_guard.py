"""The regex guard refuses patterns that can backtrack catastrophically."""

from __future__ import annotations

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


# No wall-clock threshold (the suite runs on loaded machines): catastrophic backtracking
# on a 4,000-character near-match never ends, so the pytest timeout is the detector,
# and a linear pattern finishes in milliseconds even on a busy machine.
@pytest.mark.timeout(300)
def test_accepted_patterns_stay_fast_on_adversarial_lines() -> None:
    """What the guard lets through finishes on a long near-match line."""
    line = "a" * 4000 + "!"
    for pattern in [r"a+b", r"(?:ab)*c", r"\w+\s+\w+$", "a{1,100}b"]:
        assert compile_guarded(pattern).search(line) is None
