"""Deterministic, bounded, versioned queries over one snapshot.

Limits (documented, enforced, and reported through ``complete``/``truncated``):

- at most ``query.max_results`` matches (default 1,000, ceiling 10,000); more → truncated;
- content queries read files of at most ``MAX_FILE_BYTES`` (1 MiB); a larger file is skipped
  and the result is incomplete;
- at most ``MAX_SCANNED_BYTES`` (64 MiB) are read per query; beyond that the result is
  truncated and incomplete;
- regex search runs line by line; a line longer than ``MAX_LINE_CHARS`` is skipped
  (incomplete), unsafe patterns are refused up front (``regex_guard``), and a query's
  regex search stops after ``REGEX_SECONDS`` (truncated, incomplete);
- ``python_symbol`` parses ``.py``/``.pyi`` files with ``ast`` (never imports or runs them);
  an unparsable file makes the result incomplete. Its result identity is location-free:
  each match counts by path, role and (for a ``def``/``class``) the digest of the
  definition's syntax tree, so moving a definition or adding a comment above it keeps the
  result, and editing its body changes it;
- ``content_glob`` matches the domain's paths with each one's fingerprint (digest and
  executable bit); ``path_glob`` is its membership-only sibling.

Paths are visited in sorted order, so the same snapshot always yields the same result.
Bump ``ANALYZER_VERSION[kind]`` whenever a kind's behaviour changes: a stored baseline
with another version needs a recheck.
"""

from __future__ import annotations

import ast
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .digests import digest_json
from .globs import compile_glob
from .models import (
    ContentGlobQuery,
    GrepQuery,
    PathGlobQuery,
    PythonSymbolQuery,
    QuerySpec,
    TypeScriptBoundaryQuery,
)
from .records import QueryMatch, QueryResult
from .regex_guard import compile_guarded
from .views import EntryLike, TreeView, entry_fingerprint

__all__ = [
    "ANALYZER_VERSION",
    "MAX_FILE_BYTES",
    "MAX_LINE_CHARS",
    "MAX_SCANNED_BYTES",
    "REGEX_SECONDS",
    "Domain",
    "domain_of",
    "evaluate_query",
    "is_typescript_input",
    "query_domain",
    "typescript_domain",
]

ANALYZER_VERSION: dict[str, str] = {
    "grep": "grep/1",
    "path_glob": "path_glob/1",
    "content_glob": "content_glob/1",
    # 2: location-free result identity with definition content
    "python_symbol": "python_symbol/2",
    # 2: the fingerprint includes the executable bit
    "exact_blob": "exact_blob/2",
    # the adapter version and the pinned compiler: a change of either reopens the claim.
    # 2: every route to the symbol, implementations, loose files, the identifier query set
    "typescript_boundary": "typescript_boundary/2 typescript/5.9.3",
}
MAX_FILE_BYTES = 1 << 20
MAX_SCANNED_BYTES = 64 << 20
MAX_LINE_CHARS = 4096
#: Wall-clock budget for the regex search of one query. The guard refuses exponential
#: patterns; this bounds the polynomial (e.g. quadratic ``a+b`` on long lines) ones. It is
#: the one limit that depends on the machine, and crossing it can only make a result
#: incomplete, which never lets a claim stay current.
REGEX_SECONDS = 5.0
_TEXT_CHARS = 200


@dataclass(frozen=True)
class Domain:
    """The entries of a snapshot that a domain glob selects, with their two digests."""

    members: tuple[EntryLike, ...]
    membership_digest: str
    content_digest: str


def domain_of(glob: str, tree: TreeView) -> Domain:
    """Select the entries of ``tree`` inside ``glob``, sorted by path (memoized per tree)."""
    cached = tree.memo.get(("domain", glob))
    if isinstance(cached, Domain):
        return cached
    domain = _select_domain(glob, tree)
    tree.memo["domain", glob] = domain
    return domain


#: What the TypeScript compiler can read: sources, declarations, JavaScript, JSON (configs,
#: ``package.json``, JSON modules). Its fingerprint is the cheap skip test.
_TYPESCRIPT_SUFFIXES = (".ts", ".tsx", ".mts", ".cts", ".js", ".jsx", ".mjs", ".cjs", ".json")


def is_typescript_input(path: str) -> bool:
    """Whether ``path`` is a file the TypeScript worker may read (outside ``node_modules``)."""
    return path.endswith(_TYPESCRIPT_SUFFIXES) and "node_modules" not in path.split("/")


def typescript_domain(glob: str, tree: TreeView) -> Domain:
    """The TypeScript inputs of ``tree`` inside ``glob`` (memoized per tree).

    Its content digest is the cheap fingerprint of docs/ARCHITECTURE.md, "TypeScript
    boundary": equal digests mean the compiler would read the same bytes.
    """
    cached = tree.memo.get(("ts-domain", glob))
    if isinstance(cached, Domain):
        return cached
    domain = _select_domain(glob, tree, is_typescript_input)
    tree.memo["ts-domain", glob] = domain
    return domain


def query_domain(query: QuerySpec, tree: TreeView) -> Domain:
    """The domain ``query`` is evaluated over."""
    if isinstance(query, TypeScriptBoundaryQuery):
        return typescript_domain(query.domain, tree)
    return domain_of(query.domain, tree)


def _select_domain(
    glob: str, tree: TreeView, keep: Callable[[str], bool] = lambda _path: True
) -> Domain:
    matcher = compile_glob(glob)
    # Only paths under the glob's literal prefix can match: bisect instead of scanning.
    candidates = tree.paths_under(matcher.prefix)
    members = tuple(tree.entries[p] for p in candidates if matcher.matches(p) and keep(p))
    return Domain(
        members=members,
        membership_digest=digest_json([m.path for m in members]),
        content_digest=digest_json([[m.path, entry_fingerprint(m)] for m in members]),
    )


@dataclass
class _Scan:
    limit: int
    matches: list[QueryMatch] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    scanned: int = 0
    truncated: bool = False
    stopped: bool = False
    deadline: float = field(default_factory=lambda: time.monotonic() + REGEX_SECONDS)

    def add(self, match: QueryMatch) -> bool:
        """Record a match; False once the result is full (and marks it truncated)."""
        if len(self.matches) >= self.limit:
            self.truncated = True
            return False
        self.matches.append(match)
        return True


def evaluate_query(query: QuerySpec, tree: TreeView) -> QueryResult:
    """Run ``query`` over ``tree``; raise BlobMissing when a needed blob cannot be read.

    The tree is immutable and the query deterministic, so a result is memoized on the tree:
    claims sharing a query are evaluated once per snapshot.
    """
    key = ("query", query.model_dump_json())
    cached = tree.memo.get(key)
    if isinstance(cached, QueryResult):
        return cached
    result = _evaluate(query, tree)
    tree.memo[key] = result
    return result


def _evaluate(query: QuerySpec, tree: TreeView) -> QueryResult:
    if isinstance(query, TypeScriptBoundaryQuery):
        return tree.boundary_analyzer().evaluate(query, tree)
    domain = domain_of(query.domain, tree)
    scan = _Scan(limit=query.max_results)
    if isinstance(query, PathGlobQuery | ContentGlobQuery):
        content = isinstance(query, ContentGlobQuery)
        for member in domain.members:
            text = (entry_fingerprint(member) or "") if content else ""
            if not scan.add(QueryMatch(path=member.path, text=text)):
                break
    else:
        _scan_contents(query, domain, tree, scan)
    return _result(query, domain, scan)


def _scan_contents(
    query: GrepQuery | PythonSymbolQuery, domain: Domain, tree: TreeView, scan: _Scan
) -> None:
    for member in domain.members:
        if member.kind != "file" or not _relevant(query, member.path):
            continue
        if member.size > MAX_FILE_BYTES:
            scan.notes.append(f"{member.path}: larger than {MAX_FILE_BYTES} bytes, not read")
            continue
        if scan.scanned + member.size > MAX_SCANNED_BYTES:
            scan.notes.append(f"stopped before {member.path}: {MAX_SCANNED_BYTES} bytes read")
            scan.truncated = True
            return
        data = tree.read(member)
        scan.scanned += len(data)
        found = (
            _grep(query, member.path, data, scan)
            if isinstance(query, GrepQuery)
            else (_symbols(query, member.path, data, scan))
        )
        for match in found:
            if not scan.add(match):
                return
        if scan.stopped:
            scan.truncated = True
            return


def _relevant(query: GrepQuery | PythonSymbolQuery, path: str) -> bool:
    return isinstance(query, GrepQuery) or path.endswith((".py", ".pyi"))


def _result(query: QuerySpec, domain: Domain, scan: _Scan) -> QueryResult:
    version = ANALYZER_VERSION[query.kind]
    complete = not scan.truncated and not scan.notes
    matches = tuple(scan.matches)
    result_digest = digest_json(
        {
            "analyzer": version,
            "matches": _identity(query, matches),
            "complete": complete,
            "truncated": scan.truncated,
        }
    )
    return QueryResult(
        kind=query.kind,
        analyzer_version=version,
        matches=matches,
        complete=complete,
        truncated=scan.truncated,
        notes=tuple(scan.notes),
        members=len(domain.members),
        membership_digest=domain.membership_digest,
        content_digest=domain.content_digest,
        result_digest=result_digest,
        bytes_scanned=scan.scanned,
    )


def _identity(query: QuerySpec, matches: tuple[QueryMatch, ...]) -> list[Any]:
    """What a result's digest covers: every field, except for ``python_symbol`` whose
    matches count without their line and column (a multiset of path, role, content)."""
    if isinstance(query, PythonSymbolQuery):
        return sorted([m.path, m.role, m.text] for m in matches)
    return [m.model_dump() for m in matches]


def _grep(query: GrepQuery, path: str, data: bytes, scan: _Scan) -> Iterator[QueryMatch]:
    text = data.decode("utf-8", errors="replace")
    regex = compile_guarded(query.pattern) if query.regex else None
    for number, line in enumerate(text.split("\n"), start=1):
        if regex is not None:
            if len(line) > MAX_LINE_CHARS:
                scan.notes.append(f"{path}:{number}: line longer than {MAX_LINE_CHARS}, skipped")
                continue
            if time.monotonic() > scan.deadline:
                scan.notes.append(f"{path}:{number}: regex time budget exhausted, stopped")
                scan.stopped = True
                return
            found = regex.search(line)
            column = found.start() if found else -1
        else:
            column = line.find(query.pattern)
        if column >= 0:
            yield QueryMatch(path=path, line=number, column=column + 1, text=line[:_TEXT_CHARS])


def _symbols(query: PythonSymbolQuery, path: str, data: bytes, scan: _Scan) -> Iterator[QueryMatch]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarning from the repository is not ours
            tree = ast.parse(data, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        scan.notes.append(f"{path}: not parsable ({type(exc).__name__})")
        return
    found = sorted(_symbol_sites(tree, query.name))
    for line, column, role, content in found:
        if query.role in ("any", role):
            yield QueryMatch(path=path, line=line, column=column + 1, role=role, text=content)


def _symbol_sites(tree: ast.AST, name: str) -> Iterator[tuple[int, int, str, str]]:
    for node in ast.walk(tree):
        role = _role(node, name)
        if role is not None:
            line, column = getattr(node, "lineno", 0), getattr(node, "col_offset", 0)
            yield line, column, role, _definition_digest(node)
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield from ((*site, "") for site in _import_sites(node, name))


def _definition_digest(node: ast.AST) -> str:
    """Digest of a ``def``/``class`` syntax tree without positions (comments are not in
    it); empty for any other site."""
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return ""
    return "ast:" + digest_json(ast.dump(node, include_attributes=False))


def _role(node: ast.AST, name: str) -> str | None:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return "definition" if node.name == name else None
    if isinstance(node, ast.Name) and node.id == name:
        return "definition" if isinstance(node.ctx, ast.Store) else "reference"
    if isinstance(node, ast.Attribute) and node.attr == name:
        return "definition" if isinstance(node.ctx, ast.Store) else "reference"
    return None


def _import_sites(node: ast.Import | ast.ImportFrom, name: str) -> Iterator[tuple[int, int, str]]:
    for alias in node.names:
        bound = alias.asname or alias.name.split(".")[0]
        imported = alias.name.rsplit(".", 1)[-1]
        if imported == name and isinstance(node, ast.ImportFrom):
            yield node.lineno, node.col_offset, "reference"
        elif bound == name:
            yield node.lineno, node.col_offset, "definition"
