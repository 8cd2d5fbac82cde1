"""The conservative identifier query set of a ``typescript_boundary`` dependency.

docs/ARCHITECTURE.md, "TypeScript boundary": the symbol's name and every alias name the
worker found are matched as identifiers over every TS/JS file of the snapshot the compiler
does not analyze (outside the dependency's domain, or under ``node_modules``). A new
occurrence there is a second invalidation signal: the files holding it are handed to the
worker on the next check, which says whether the occurrence resolves to the symbol.
Inside the domain the worker itself resolves every occurrence. The match is textual and
over-approximates (comments and strings count, escaped identifiers are decoded first): a
spurious occurrence only costs a compiler run, never a verdict.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..claims.digests import digest_json
from ..claims.queries import MAX_SCANNED_BYTES, Domain
from ..claims.records import IdentifierSet
from ..claims.views import EntryLike, TreeView, entry_fingerprint

__all__ = [
    "MAX_EXTRA_FILES",
    "MAX_OCCURRENCES",
    "SOURCE_SUFFIXES",
    "Occurrences",
    "Outside",
    "identifier_set",
    "new_occurrences",
    "outside_sources",
    "scan_occurrences",
]

#: TS/JS sources (not ``.json``: a JSON file holds no identifier a consumer could use).
SOURCE_SUFFIXES = (".ts", ".tsx", ".mts", ".cts", ".js", ".jsx", ".mjs", ".cjs")
#: The most files with new occurrences one check hands to the worker; more needs a recheck.
MAX_EXTRA_FILES = 100
#: The most (path, name) occurrence counts a baseline keeps; more is an incomplete scan.
MAX_OCCURRENCES = 10_000
_ESCAPE = re.compile(r"\\u\{([0-9a-fA-F]{1,6})\}|\\u([0-9a-fA-F]{4})")
#: A maximal run of identifier characters: each run is looked up in the name set, so the
#: scan is linear in the bytes whatever the number of names.
_RUN = re.compile(r"[\w$\u200c\u200d]+")


@dataclass(frozen=True)
class Outside:
    """The TS/JS files of a snapshot the worker does not read for a domain, and their
    fingerprint (paths and content digests; no blob is read to compute it)."""

    members: tuple[EntryLike, ...]
    digest: str


@dataclass(frozen=True)
class Occurrences:
    """How often each name occurs in each outside file; ``notes`` say what was not read."""

    counts: tuple[tuple[str, str, int], ...]
    notes: tuple[str, ...]


def outside_sources(tree: TreeView, domain: Domain) -> Outside:
    """The TS/JS files of ``tree`` outside ``domain`` (memoized per tree and domain)."""
    key = ("ts-outside", domain.membership_digest)
    cached = tree.memo.get(key)
    if isinstance(cached, Outside):
        return cached
    inside = {m.path for m in domain.members}
    members = tuple(
        tree.entries[p]
        for p in tree.paths_under("")
        if p.endswith(SOURCE_SUFFIXES) and p not in inside and tree.entries[p].kind == "file"
    )
    outside = Outside(
        members=members,
        digest=digest_json([[m.path, entry_fingerprint(m)] for m in members]),
    )
    tree.memo[key] = outside
    return outside


def _unescape(text: str) -> str:
    """``\\u0063`` and ``\\u{63}`` spell identifier characters: decode them before matching."""

    def one(match: re.Match[str]) -> str:
        value = int(match.group(1) or match.group(2), 16)
        return chr(value) if value <= 0x10FFFF else match.group(0)

    return _ESCAPE.sub(one, text) if "\\u" in text else text


def scan_occurrences(tree: TreeView, outside: Outside, names: Sequence[str]) -> Occurrences:
    """Count ``names`` as identifiers in every outside file, within the scan budget.

    Raises BlobMissing when a file's blob cannot be read (as every query does).
    """
    key = ("ts-identifiers", digest_json([outside.digest, sorted(names)]))
    cached = tree.memo.get(key)
    if isinstance(cached, Occurrences):
        return cached
    wanted = frozenset(names)
    counts: list[tuple[str, str, int]] = []
    notes: list[str] = []
    scanned = 0
    for member in outside.members:
        if scanned + member.size > MAX_SCANNED_BYTES:
            notes.append(f"identifier scan stopped before {member.path}: {scanned} bytes read")
            break
        scanned += member.size
        text = _unescape(tree.read(member).decode("utf-8", errors="replace"))
        found = Counter(run for run in _RUN.findall(text) if run in wanted)
        counts.extend((member.path, name, n) for name, n in sorted(found.items()))
        if len(counts) > MAX_OCCURRENCES:
            notes.append(f"more than {MAX_OCCURRENCES} identifier occurrences outside the domain")
            break
    result = Occurrences(counts=tuple(counts[:MAX_OCCURRENCES]), notes=tuple(notes))
    tree.memo[key] = result
    return result


def identifier_set(names: Sequence[str], outside: Outside, found: Occurrences) -> IdentifierSet:
    """What a baseline keeps of the identifier query set."""
    return IdentifierSet(
        names=tuple(sorted(set(names))), outside_digest=outside.digest, occurrences=found.counts
    )


def new_occurrences(
    now: Iterable[tuple[str, str, int]], before: Iterable[tuple[str, str, int]]
) -> list[tuple[str, str, int]]:
    """Occurrences in ``now`` beyond ``before``: a new (path, name), or more of them."""
    had = {(path, name): count for path, name, count in before}
    return [(p, n, c) for p, n, c in now if c > had.get((p, n), 0)]
