"""The boundary ``turn_end`` computes for an answer, not only what the caller lists.

docs/ARCHITECTURE.md, "The agent's turn": an answer rests on

- each cited span's file, as ``exact_blob``;
- for each named symbol, its compiler boundary (a ``typescript_boundary`` query set) when
  the snapshot holds TypeScript sources, and a conservative identifier query set: every
  line of the snapshot where the name occurs as an identifier (a textual match that
  over-approximates: a comment or string counts, so a change can only reopen the answer,
  never hide from it);
- the repository's configuration and lockfiles present in the snapshot (``package.json``,
  lockfiles, ``tsconfig*.json``, ``pyproject.toml``, ``requirements*.txt``, ``setup.cfg``
  …, at any depth), as ``exact_blob``.

With more configuration files than ``MAX_CONFIG_FILES`` the rest is covered by one
``content_glob`` over the whole snapshot; an answer with nothing at all to rest on gets the
same, so no answer is ever recorded with an empty boundary.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from ..claims.models import (
    MAX_QUERY_RESULTS,
    ContentGlobQuery,
    Dependency,
    ExactBlobSpec,
    GrepQuery,
    QueryDependencySpec,
    SpanRef,
    TypeScriptBoundaryQuery,
)

__all__ = [
    "CONFIG_NAMES",
    "MAX_CONFIG_FILES",
    "SymbolRef",
    "answer_dependencies",
    "is_config_file",
]

#: Configuration and lockfile names pinned by exact content wherever they appear.
CONFIG_NAMES = frozenset(
    {
        "package.json",
        "package-lock.json",
        "npm-shrinkwrap.json",
        "yarn.lock",
        "pnpm-lock.yaml",
        "pnpm-workspace.yaml",
        "bun.lock",
        "bun.lockb",
        "deno.json",
        "deno.lock",
        "jsconfig.json",
        ".npmrc",
        ".nvmrc",
        "pyproject.toml",
        "poetry.lock",
        "uv.lock",
        "Pipfile",
        "Pipfile.lock",
        "setup.cfg",
        "setup.py",
        "tox.ini",
        ".python-version",
        "Cargo.toml",
        "Cargo.lock",
        "go.mod",
        "go.sum",
    }
)
_CONFIG_PATTERNS = (
    re.compile(r"tsconfig.*\.json"),
    re.compile(r"requirements.*\.txt"),
    re.compile(r"constraints.*\.txt"),
)
#: Most configuration files pinned one by one; beyond, one whole-snapshot content glob.
MAX_CONFIG_FILES = 50
#: Most results of a symbol's identifier query set (more is a truncated, still-checked set).
MAX_IDENTIFIER_LINES = 1000
_TS_SOURCES = (".ts", ".tsx", ".mts", ".cts")
_IDENT_EDGE = r"A-Za-z0-9_$"


class SymbolRef(BaseModel):
    """A symbol an answer names: its identifier and, optionally, the file declaring it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(
        min_length=1,
        max_length=200,
        pattern=r"^[A-Za-z_$][A-Za-z0-9_$]*$",
        description="The identifier (a TypeScript or Python name).",
        examples=["priceOf"],
    )
    file: str | None = Field(
        None,
        min_length=1,
        max_length=4096,
        description="The file whose declaration is meant, when several declare the name.",
    )


def is_config_file(path: str) -> bool:
    """Whether ``path`` (a snapshot path) is a configuration or lock file."""
    name = path.rsplit("/", 1)[-1]
    return name in CONFIG_NAMES or any(p.fullmatch(name) for p in _CONFIG_PATTERNS)


def _exact(path: str) -> Dependency:
    return Dependency(exact_blob=ExactBlobSpec(path=path))


def _query(query: object) -> Dependency:
    return Dependency(query_set=QueryDependencySpec.model_validate({"query": query}))


def _identifier_query(name: str) -> GrepQuery:
    pattern = f"(?<![{_IDENT_EDGE}]){re.escape(name)}(?![{_IDENT_EDGE}])"
    return GrepQuery(
        kind="grep", domain="**", pattern=pattern, regex=True, max_results=MAX_IDENTIFIER_LINES
    )


def answer_dependencies(
    paths: Mapping[str, object], spans: Sequence[SpanRef], symbols: Sequence[SymbolRef]
) -> tuple[list[Dependency], list[str]]:
    """The dependencies of an answer on a snapshot whose entries are ``paths`` (path →
    entry), and one line per dependency saying why it is there."""
    deps: list[Dependency] = []
    lines: list[str] = []
    for path in dict.fromkeys(span.path for span in spans):
        deps.append(_exact(path))
        lines.append(f"exact_blob {path}: a cited span's file")
    has_ts = any(p.endswith(_TS_SOURCES) for p in paths)
    for symbol in symbols:
        if has_ts:
            query = TypeScriptBoundaryQuery(
                kind="typescript_boundary", symbol=symbol.name, file=symbol.file
            )
            deps.append(_query(query))
            lines.append(f"query_set typescript_boundary {symbol.name}: its compiler boundary")
        deps.append(_query(_identifier_query(symbol.name)))
        lines.append(f"query_set grep {symbol.name}: every line naming it as an identifier")
    config = sorted(p for p in paths if is_config_file(p))
    for path in config[:MAX_CONFIG_FILES]:
        deps.append(_exact(path))
        lines.append(f"exact_blob {path}: configuration or lockfile")
    if len(config) > MAX_CONFIG_FILES or not deps:
        why = (
            f"{len(config) - MAX_CONFIG_FILES} more configuration files"
            if deps
            else "nothing narrower to rest on"
        )
        whole = ContentGlobQuery(kind="content_glob", domain="**", max_results=MAX_QUERY_RESULTS)
        deps.append(_query(whole))
        lines.append(f"query_set content_glob **: the whole snapshot ({why})")
    return deps, lines
