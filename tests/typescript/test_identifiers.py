"""The conservative identifier query set: the symbol's name and every alias name, matched
over every TS/JS file of the snapshot, as a second invalidation signal beside the
compiler's own domain."""

from __future__ import annotations

from pathlib import Path

import pytest

from probe_service.claims import change_analyze, claim_create
from probe_service.claims.applicability import check_dependency
from probe_service.claims.baselines import compute_baseline
from probe_service.claims.models import Dependency
from probe_service.claims.queries import MAX_SCANNED_BYTES, typescript_domain
from probe_service.claims.receipts import no_receipts
from probe_service.claims.records import QueryBaseline
from probe_service.claims.views import MemoryEntry, TreeView
from probe_service.sandbox import SandboxRuntime
from probe_service.snapshot import snapshot_capture
from probe_service.store import Store
from probe_service.typescript.identifiers import (
    new_occurrences,
    outside_sources,
    scan_occurrences,
)

from .conftest import TS_CALLER, ts_view
from .corpus import BASE, overlay

FILES = {path: text.encode() for path, text in overlay(BASE).items()}


def _tree(extra: dict[str, str] | None = None) -> TreeView:
    return ts_view({**FILES, **{p: t.encode() for p, t in (extra or {}).items()}})


class TestOccurrences:
    def test_outside_is_every_ts_js_file_the_domain_leaves(self) -> None:
        """Files outside the domain glob and under node_modules count; JSON and other
        files do not; the fingerprint moves with their content."""
        tree = _tree(
            {
                "scripts/a.ts": "x",
                "node_modules/v/i.cjs": "x",
                "scripts/data.json": "{}",
                "README.md": "chargeCard",
            }
        )
        outside = outside_sources(tree, typescript_domain("src/**", tree))
        assert [m.path for m in outside.members] == ["node_modules/v/i.cjs", "scripts/a.ts"]
        changed = _tree(
            {
                "scripts/a.ts": "y",
                "node_modules/v/i.cjs": "x",
                "scripts/data.json": "{}",
                "README.md": "chargeCard",
            }
        )
        assert outside_sources(changed, typescript_domain("src/**", changed)).digest != (
            outside.digest
        )

    def test_names_match_as_identifiers(self) -> None:
        """A whole identifier counts (escaped spellings decoded first); a longer name that
        contains it does not. Comments count too: an over-count only costs a compiler run."""
        text = (
            "chargeCard(1); pay(2); chargeCardLike(3); xchargeCard; $pay; pay$;\n"
            "\\u0063hargeCard(4); \\u{70}ay(5); // chargeCard\n"
        )
        tree = _tree({"scripts/a.ts": text})
        outside = outside_sources(tree, typescript_domain("src/**", tree))
        found = scan_occurrences(tree, outside, ["chargeCard", "pay"])
        assert found.counts == (("scripts/a.ts", "chargeCard", 3), ("scripts/a.ts", "pay", 2))
        assert found.notes == ()

    def test_new_occurrences_are_new_paths_or_more_of_a_name(self) -> None:
        """Fewer or as many occurrences are not new; one more, or a new file, is."""
        before = [("a.ts", "pay", 2), ("b.ts", "chargeCard", 1)]
        now = [("a.ts", "pay", 2), ("b.ts", "chargeCard", 2), ("c.ts", "pay", 1)]
        assert new_occurrences(now, before) == [("b.ts", "chargeCard", 2), ("c.ts", "pay", 1)]
        assert new_occurrences([("a.ts", "pay", 1)], before) == []

    def test_scan_past_its_budget_says_so(self) -> None:
        """More outside bytes than the scan budget: a note (the result is incomplete),
        without reading the file."""
        big = MemoryEntry("scripts/big.js", "file", "0" * 64, MAX_SCANNED_BYTES + 1)

        def never(digest: str) -> bytes:
            raise AssertionError(f"read {digest}")

        tree = TreeView("s" * 64, {big.path: big}, never)
        outside = outside_sources(tree, typescript_domain("src/**", tree))
        found = scan_occurrences(tree, outside, ["chargeCard"])
        assert found.notes == ("identifier scan stopped before scripts/big.js: 0 bytes read",)


NARROW = {
    "query_set": {
        "query": {
            "kind": "typescript_boundary",
            "symbol": "chargeCard",
            "file": "src/payments.ts",
            "domain": "src/**",
        }
    }
}
BARREL = {"src/index.ts": 'export { chargeCard as pay } from "./payments";\n'}


def _baseline(tree: TreeView, dependency: dict[str, object] = NARROW) -> QueryBaseline:
    baseline = compute_baseline(0, Dependency.model_validate(dependency), tree)
    assert isinstance(baseline, QueryBaseline)
    return baseline


@pytest.mark.slow
@pytest.mark.usefixtures("runtime")
class TestSecondSignal:
    """Each check reruns the sandboxed worker (2-3 s)."""

    def test_the_baseline_keeps_every_alias_name(self) -> None:
        """The identifier query set holds the symbol and the aliases the worker found."""
        baseline = _baseline(_tree(BARREL))
        assert baseline.identifiers is not None
        assert baseline.identifiers.names == ("chargeCard", "pay")

    def test_a_caller_outside_the_domain_through_an_alias_reopens(self) -> None:
        """A new file outside `src/**` calling the barrel's alias: the compiler reruns with
        that file, the occurrence resolves to chargeCard, the claim needs a recheck."""
        baseline = _baseline(_tree(BARREL))
        caller = 'import { pay } from "../src/index";\n\npay(-100);\n'
        check = check_dependency(0, baseline, _tree({**BARREL, "scripts/batch.ts": caller}))
        assert check.state == "needs_recheck"
        assert "boundary names newly outside the domain: pay in scripts/batch.ts" in check.reason

    def test_a_same_named_local_outside_the_domain_stays_current(self) -> None:
        """A new file outside the domain with its own chargeCard: the compiler reruns, the
        occurrence resolves elsewhere, the claim stays current."""
        baseline = _baseline(_tree())
        local = "const chargeCard = (n: number): boolean => n < 0;\nchargeCard(-1);\n"
        check = check_dependency(0, baseline, _tree({"scripts/local.ts": local}))
        assert (check.state, check.reason) == (
            "current",
            "new occurrence(s) outside the domain; result re-evaluated and unchanged; "
            "boundary names newly outside the domain: chargeCard in scripts/local.ts",
        )

    def test_a_file_without_the_names_skips_the_compiler(self) -> None:
        """A new TS file outside the domain with none of the names: current, no rerun."""
        baseline = _baseline(_tree())
        check = check_dependency(0, baseline, _tree({"scripts/other.ts": "export {};\n"}))
        assert (check.state, check.reason) == (
            "current",
            "TypeScript inputs and identifier occurrences unchanged; compiler skipped",
        )

    def test_an_occurrence_under_node_modules_is_analyzed(self) -> None:
        """A vendored file under node_modules (never a compiler input) calling chargeCard:
        handed to the worker as an extra file, found, and the claim reopens."""
        dependency = {"query_set": {"query": {**NARROW["query_set"]["query"], "domain": "**"}}}
        baseline = _baseline(_tree(), dependency)
        vendored = 'const { chargeCard } = require("../../src/payments");\nchargeCard(-1);\n'
        check = check_dependency(0, baseline, _tree({"node_modules/v/index.js": vendored}))
        assert check.state == "needs_recheck"
        assert "chargeCard in node_modules/v/index.js" in check.reason


@pytest.mark.slow
def test_change_analyze_finds_a_narrow_claim_for_an_outside_file(
    tmp_path: Path, sqlite_store: Store, runtime: SandboxRuntime
) -> None:
    """A claim whose domain is `src/**` is a candidate when only `scripts/` changed (the
    identifier query set covers every TS/JS file), and the outside caller reopens it."""
    del runtime  # marks the test `sandbox`; the service locates it itself
    root = tmp_path / "shop"
    root.mkdir()
    for path, data in FILES.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
    first = snapshot_capture(sqlite_store, root).snapshot_id
    request = {
        "scope": "shop",
        "statement": "every caller of chargeCard checks the result",
        "kind": "behavior",
        "snapshot_id": first,
        "dependencies": [NARROW],
    }
    claim_id = claim_create(sqlite_store, request, receipts=no_receipts, caller=TS_CALLER).claim_id
    (root / "scripts").mkdir()
    (root / "scripts/batch.ts").write_text(
        'import { chargeCard } from "../src/payments";\n\nchargeCard(-500);\n'
    )
    second = snapshot_capture(sqlite_store, root).snapshot_id
    analysis = change_analyze(sqlite_store, first, second, caller=TS_CALLER)
    assert analysis.changed_paths == ("scripts/batch.ts",)
    assert [o.claim_id for o in analysis.opened] == [claim_id]
