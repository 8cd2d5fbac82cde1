"""Refuse regular expressions that can backtrack catastrophically.

``re`` has no timeout, so a pattern like ``(a+)+b`` can pin a worker on one line. We
refuse, before compiling, any repeat whose body can itself repeat (nested quantifiers)
and backreferences; the scanner also caps line length and file size.
"""

from __future__ import annotations

import re
from functools import lru_cache
from re import _parser as sre_parse  # type: ignore[attr-defined]  # no public parse tree
from typing import Any

from ..errors import InvalidClaim

__all__ = ["compile_guarded"]

_REPEATS = {"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"}
_NESTED = {"SUBPATTERN", "BRANCH", "ATOMIC_GROUP", "ASSERT", "ASSERT_NOT"}


@lru_cache(maxsize=256)
def compile_guarded(pattern: str) -> re.Pattern[str]:
    """Compile ``pattern`` for line-by-line search.

    Raises InvalidClaim when the pattern is invalid, has a repeat inside a repeat, an
    alternation inside a repeat, or a backreference.
    """
    try:
        tree = sre_parse.parse(pattern)
    except re.error as exc:
        raise InvalidClaim(f"query.pattern: invalid regex: {exc}") from exc
    if _has_nested_repeat(list(tree), inside_repeat=False):
        raise InvalidClaim(
            "query.pattern: nested quantifiers, alternation under a quantifier "
            "and backreferences are refused"
        )
    return re.compile(pattern)


def _has_nested_repeat(items: list[Any], *, inside_repeat: bool) -> bool:
    for op, arg in items:
        name = str(op)
        if name in ("GROUPREF", "GROUPREF_EXISTS"):
            return True
        if name in _REPEATS:
            _low, high, body = arg
            repeats = high is sre_parse.MAXREPEAT or high > 1
            if inside_repeat and repeats:
                return True
            if _has_nested_repeat(list(body), inside_repeat=inside_repeat or repeats):
                return True
        elif name == "BRANCH" and inside_repeat:
            return True  # (a|aa)* backtracks exponentially on overlapping alternatives
        elif name in _NESTED:
            for sub in _subpatterns(name, arg):
                if _has_nested_repeat(list(sub), inside_repeat=inside_repeat):
                    return True
    return False


def _subpatterns(name: str, arg: Any) -> list[Any]:
    if name == "SUBPATTERN":
        return [arg[-1]]
    if name == "BRANCH":
        return list(arg[1])
    if name in ("ASSERT", "ASSERT_NOT"):
        return [arg[1]]
    return [arg]
