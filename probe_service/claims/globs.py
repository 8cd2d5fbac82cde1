"""Domain globs over POSIX repository paths, with ``**`` and a literal prefix for indexing.

``fnmatch`` lets ``*`` cross ``/``, which would let ``src/*.py`` claim ``src/a/b.py``; here
``*``, ``?`` and ``[...]`` stay inside one path segment and only a whole ``**`` segment
spans directories (zero or more of them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from ..errors import InvalidClaim

__all__ = ["DomainGlob", "ancestor_prefixes", "compile_glob"]

_WILDCARDS = frozenset("*?[")
#: Longest domain glob accepted; longer ones are almost certainly mistakes.
MAX_GLOB_LENGTH = 1024


@dataclass(frozen=True)
class DomainGlob:
    """A compiled domain glob: ``matches(path)`` and the directory prefix it is indexed by."""

    pattern: str
    regex: re.Pattern[str]
    prefix: str

    def matches(self, path: str) -> bool:
        """Whether the repository-relative POSIX ``path`` lies in this domain."""
        return self.regex.match(path + "/") is not None


def compile_glob(pattern: str) -> DomainGlob:
    """Compile ``pattern``; raise InvalidClaim when it is empty, absolute or escapes."""
    return _compile_cached(pattern)


@lru_cache(maxsize=4096)
def _compile_cached(pattern: str) -> DomainGlob:
    segments = _check_pattern(pattern)
    parts: list[str] = []
    for index, segment in enumerate(segments):
        if segment == "**":
            # A trailing ``**`` means "everything below", never the directory itself.
            last = index == len(segments) - 1
            parts.append("(?:[^/]+/)+" if last else "(?:[^/]+/)*")
        else:
            parts.append(_translate_segment(segment, pattern) + "/")
    regex = re.compile("".join(parts) + r"\Z", re.DOTALL)
    return DomainGlob(pattern=pattern, regex=regex, prefix=_literal_prefix(segments))


def ancestor_prefixes(path: str) -> list[str]:
    """Every directory prefix of ``path`` a domain can be indexed by: ``""``, ``"a/"``, ..."""
    pieces = path.split("/")[:-1]
    return [""] + ["/".join(pieces[: i + 1]) + "/" for i in range(len(pieces))]


def _check_pattern(pattern: str) -> list[str]:
    if not pattern or len(pattern) > MAX_GLOB_LENGTH:
        raise InvalidClaim(f"domain: {pattern!r} must be 1..{MAX_GLOB_LENGTH} characters")
    if pattern.startswith("/") or "\\" in pattern or "\x00" in pattern:
        raise InvalidClaim(f"domain: {pattern!r} must be a relative POSIX glob")
    segments = pattern.split("/")
    for segment in segments:
        if segment in ("", ".", ".."):
            raise InvalidClaim(f"domain: {pattern!r} has an empty, '.' or '..' segment")
        if "**" in segment and segment != "**":
            raise InvalidClaim(f"domain: {pattern!r}: '**' must be a whole path segment")
    return segments


def _literal_prefix(segments: list[str]) -> str:
    """Directory part before the first wildcard: the key a domain is indexed under."""
    literal: list[str] = []
    for segment in segments[:-1]:
        if _WILDCARDS & set(segment):
            break
        literal.append(segment)
    return "".join(part + "/" for part in literal)


def _translate_segment(segment: str, pattern: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(segment):
        char = segment[i]
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = segment.find("]", i + 2 if segment[i + 1 : i + 2] in ("!", "]") else i + 1)
            if end < 0:
                raise InvalidClaim(f"domain: {pattern!r} has an unclosed '['")
            body = segment[i + 1 : end]
            negate = body.startswith("!")
            body = body[1:] if negate else body
            escaped = body.replace("\\", "\\\\").replace("^", "\\^")
            out.append(f"[{'^/' if negate else ''}{escaped}]")
            i = end
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)
