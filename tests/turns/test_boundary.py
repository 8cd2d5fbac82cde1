"""The boundary turn_end computes for an answer (docs/ARCHITECTURE.md, "The agent's turn")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from probe_service.claims import SpanRef
from probe_service.service import ProbeService
from probe_service.store import Store
from probe_service.turns import SymbolRef, answer_dependencies
from probe_service.turns.boundary import MAX_CONFIG_FILES

from ..claims.helpers import WorkTree


def forms(deps: list[Any]) -> list[tuple[str, str]]:
    out = []
    for dep in deps:
        if dep.exact_blob is not None:
            out.append(("exact_blob", dep.exact_blob.path))
        else:
            query = dep.query_set.query
            out.append((query.kind, getattr(query, "symbol", None) or query.domain))
    return out


def test_spans_symbols_and_configuration_are_in_the_boundary() -> None:
    """Cited files, each symbol's identifier set and every config/lock file are there."""
    paths = dict.fromkeys(
        ["src/parse.py", "pyproject.toml", "web/package.json", "web/pnpm-lock.yaml", "README.md"]
    )
    paths["web/tsconfig.build.json"] = None
    deps, lines = answer_dependencies(
        paths, [SpanRef(path="src/parse.py", start=0, end=4)], [SymbolRef(name="parse")]
    )
    assert forms(deps) == [
        ("exact_blob", "src/parse.py"),
        ("grep", "**"),
        ("exact_blob", "pyproject.toml"),
        ("exact_blob", "web/package.json"),
        ("exact_blob", "web/pnpm-lock.yaml"),
        ("exact_blob", "web/tsconfig.build.json"),
    ]
    assert len(lines) == len(deps)


def test_a_typescript_snapshot_gets_the_compiler_boundary_of_each_symbol() -> None:
    """With TypeScript sources, a named symbol's typescript_boundary is a dependency."""
    paths = dict.fromkeys(["src/price.ts", "package.json"])
    deps, _ = answer_dependencies(paths, [], [SymbolRef(name="priceOf", file="src/price.ts")])
    assert forms(deps)[:2] == [("typescript_boundary", "priceOf"), ("grep", "**")]
    assert deps[0].query_set is not None
    assert deps[0].query_set.query.file == "src/price.ts"  # type: ignore[union-attr]


def test_the_identifier_query_set_matches_whole_identifiers_only() -> None:
    """The name's identifier pattern matches ``parse(`` and not ``parser``."""
    import re

    (dep,) = answer_dependencies({}, [], [SymbolRef(name="$parse")])[0][:1]
    assert dep.query_set is not None
    pattern = re.compile(dep.query_set.query.pattern)  # type: ignore[union-attr]
    assert pattern.search("x = $parse(a)")
    assert not pattern.search("x = $parser(a)")
    assert not pattern.search("x = a$parse")


def test_too_many_config_files_fall_back_to_the_whole_snapshot() -> None:
    """Past MAX_CONFIG_FILES the rest is covered by a whole-snapshot content glob."""
    paths = dict.fromkeys(f"p{i}/package.json" for i in range(MAX_CONFIG_FILES + 3))
    deps, _ = answer_dependencies(paths, [], [])
    assert len(deps) == MAX_CONFIG_FILES + 1
    assert forms(deps)[-1] == ("content_glob", "**")


def test_an_answer_with_nothing_to_rest_on_rests_on_everything() -> None:
    """No span, symbol or config file: the boundary is never empty."""
    deps, _ = answer_dependencies({"notes.txt": None}, [], [])
    assert forms(deps) == [("content_glob", "**")]


def test_the_recorded_answer_carries_the_computed_boundary(
    svc: ProbeService, work: WorkTree
) -> None:
    """turn_end stores an unresolved answer with the boundary the service computed."""
    begun = svc.call(
        "turn_begin", {"root": str(work.root), "scope": "payments", "symbols": [{"name": "parse"}]}
    )
    ended = svc.call(
        "turn_end",
        {
            "turn": begun["turn_id"],
            "answer": "parse splits on commas",
            "spans": [{"path": "src/parse.py", "start": 0, "end": 9}],
        },
    )
    claim = svc.call("claim_show", {"claim_id": ended["claim_id"]})
    assert claim["outcome"] == "unresolved"
    assert claim["snapshot_id"] == begun["snapshot_id"]
    kinds = [d.get("path") or d["query"]["kind"] for d in claim["dependencies"]]
    assert kinds == ["src/parse.py", "grep", "pyproject.toml", "requirements-dev.txt"]


def test_a_typescript_answer_rests_on_the_compiler_boundary(
    svc: ProbeService, tmp_path: Path, sqlite_store: Store
) -> None:
    """With the real compiler worker: turn_end's boundary of a TypeScript symbol is complete
    and names its consumer, and editing the consumer blocks the next dispatch."""
    work = WorkTree(tmp_path / "shop", sqlite_store)
    work.root.mkdir()
    work.write(
        "src/price.ts", "export function priceOf(c: number): string {\n  return `${c}`;\n}\n"
    )
    work.write("src/cart.ts", "import { priceOf } from './price';\nexport const p = priceOf(1);\n")
    work.write("package.json", '{"name": "shop"}\n')
    begun = svc.call(
        "turn_begin",
        {"root": str(work.root), "scope": "shop", "symbols": [{"name": "priceOf"}]},
    )
    ended = svc.call("turn_end", {"turn": begun["turn_id"], "answer": "cart.ts calls priceOf"})
    claim = svc.call("claim_show", {"claim_id": ended["claim_id"]})
    (boundary,) = [
        d for d in claim["dependencies"] if d.get("query", {}).get("kind") == "typescript_boundary"
    ]
    assert boundary["complete"] is True
    assert "src/cart.ts" in {m["path"] for m in boundary["matches"]}
    work.write("src/cart.ts", "import { priceOf } from './price';\nexport const p = priceOf(2);\n")
    check = svc.call("dispatch_check", {"turn": begun["turn_id"], "tool": "Bash"})
    assert check["verdict"] == "block"
