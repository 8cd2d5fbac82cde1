"""A TypeScript boundary as a claim dependency: reopened by a new consumer, skipped when the
TypeScript inputs did not change, never current when incomplete."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from sqlalchemy import select, update

from probe_service.claims import change_analyze, claim_check, claim_create
from probe_service.claims.applicability import check_dependency
from probe_service.claims.baselines import compute_baseline
from probe_service.claims.models import Dependency, TypeScriptBoundaryQuery
from probe_service.claims.queries import ANALYZER_VERSION, typescript_domain
from probe_service.claims.receipts import no_receipts
from probe_service.claims.records import QueryBaseline
from probe_service.claims.tables import claim_dependencies
from probe_service.claims.views import TreeView
from probe_service.errors import InvalidClaim
from probe_service.sandbox import SandboxRuntime
from probe_service.snapshot import snapshot_capture
from probe_service.store import Store

from .conftest import FIXTURES, TS_CALLER, ts_view

# Each test runs the sandboxed compiler (2-3 s): out of the quick loop, in `make test`.
pytestmark = pytest.mark.slow

DEPENDENCY = {
    "query_set": {
        "query": {"kind": "typescript_boundary", "symbol": "chargeCard", "file": "src/payments.ts"}
    }
}
CALL = b"chargeCard(totalCents)"


class _Repo:
    def __init__(self, root: Path, store: Store) -> None:
        self.root, self.store = root, store

    def write(self, path: str, text: str) -> None:
        (self.root / path).write_text(text, encoding="utf-8")

    def capture(self) -> str:
        return snapshot_capture(self.store, self.root).snapshot_id


@pytest.fixture
def shop(tmp_path: Path, sqlite_store: Store, runtime: SandboxRuntime) -> _Repo:
    """The new_consumer fixture repository as a live working tree (runtime: sandboxed)."""
    del runtime  # the fixture marks the tests `sandbox`; the service locates it itself
    root = tmp_path / "shop"
    shutil.copytree(FIXTURES / "new_consumer", root)
    return _Repo(root, sqlite_store)


def _claim(repo: _Repo, snapshot_id: str) -> str:
    checkout = (repo.root / "src/checkout.ts").read_bytes()
    start = checkout.index(CALL)
    request = {
        "scope": "shop",
        "statement": "every caller of chargeCard checks the result",
        "kind": "behavior",
        "snapshot_id": snapshot_id,
        "evidence": [{"span": {"path": "src/checkout.ts", "start": start, "end": start + 40}}],
        "dependencies": [{"exact_blob": {"path": "src/checkout.ts"}}, DEPENDENCY],
    }
    return claim_create(repo.store, request, receipts=no_receipts, caller=TS_CALLER).claim_id


def test_new_consumer_in_an_untouched_file_reopens_the_claim(shop: _Repo) -> None:
    """A call added in a new file opens an obligation though the cited file is unchanged."""
    first = shop.capture()
    claim_id = _claim(shop, first)
    shop.write("src/refund.ts", 'import { chargeCard } from "./payments";\nchargeCard(-5);\n')
    second = shop.capture()
    analysis = change_analyze(shop.store, first, second, caller=TS_CALLER)
    assert [o.claim_id for o in analysis.opened] == [claim_id]
    exact, boundary = analysis.checks[0].dependencies
    assert (exact.form, exact.state) == ("exact_blob", "current")
    assert (boundary.form, boundary.state) == ("query_set", "needs_recheck")
    assert "result changed: 2 -> 4 match(es), complete=True" in boundary.reason


def test_unrelated_change_skips_the_compiler_and_stays_current(shop: _Repo) -> None:
    """A change outside the TypeScript inputs keeps the fingerprint: current, no rerun; a
    TypeScript change that adds no consumer reruns the worker and stays current."""
    first = shop.capture()
    claim_id = _claim(shop, first)
    shop.write("README.md", "# Shop\n\nNow with refunds.\n")
    readme = shop.capture()
    [check] = claim_check(shop.store, [claim_id], readme, caller=TS_CALLER)
    assert check.state == "current"
    assert check.dependencies[1].reason == (
        "TypeScript inputs and identifier occurrences unchanged; compiler skipped"
    )
    shop.write("src/util.ts", "export const cents = (n: number): number => n * 100;\n")
    other = shop.capture()
    [check] = claim_check(shop.store, [claim_id], other, caller=TS_CALLER)
    assert check.state == "current", check.reasons
    assert check.dependencies[1].reason == "domain changed; result re-evaluated and unchanged"


OLD_ANALYZER = "typescript_boundary/1 typescript/5.9.3"


def test_a_claim_made_under_the_old_analyzer_reopens(shop: _Repo) -> None:
    """A boundary baseline of the previous analyzer version is not recomputed, although
    the claim's snapshot is in the store: what the old analyzer showed the claim's author
    may have missed consumers, so the claim needs a recheck, on its own snapshot too."""
    first = shop.capture()
    claim_id = _claim(shop, first)
    column = claim_dependencies.c
    where = (column.claim_id == claim_id) & (column.position == 1)
    with shop.store.transaction() as conn:
        stored = json.loads(conn.execute(select(column.baseline).where(where)).scalar_one())
        stored["analyzer_version"] = OLD_ANALYZER
        stored.pop("identifiers", None)
        conn.execute(update(claim_dependencies).where(where).values(baseline=json.dumps(stored)))
    [check] = claim_check(shop.store, [claim_id], first, caller=TS_CALLER)
    assert check.state == "needs_recheck"
    assert check.dependencies[1].reason == (
        f"analyzer changed: {OLD_ANALYZER} -> {ANALYZER_VERSION['typescript_boundary']}"
    )


def _baseline(tree: TreeView, **changes: object) -> QueryBaseline:
    query = TypeScriptBoundaryQuery(kind="typescript_boundary", symbol="chargeCard")
    domain = typescript_domain(query.domain, tree)
    fields: dict[str, object] = {
        "form": "query_set",
        "query": query,
        "analyzer_version": ANALYZER_VERSION["typescript_boundary"],
        "members": len(domain.members),
        "membership_digest": domain.membership_digest,
        "content_digest": domain.content_digest,
        "result_digest": "0" * 64,
        "match_count": 0,
        "complete": True,
        "truncated": False,
    }
    return QueryBaseline.model_validate({**fields, **changes})


TREE = {"src/a.ts": b"export function chargeCard() {}\n", "README.md": b"hi\n"}


@pytest.mark.parametrize("changes", [{"complete": False}, {"truncated": True}])
def test_incomplete_or_truncated_baseline_is_never_current(changes: dict[str, object]) -> None:
    """Even on the very snapshot it was taken on, an incomplete or truncated boundary
    baseline needs a recheck (no worker runs: it is decided before)."""
    tree = ts_view(TREE)
    check = check_dependency(0, _baseline(tree, **changes), tree)
    assert (check.state, check.reason) == (
        "needs_recheck",
        "baseline boundary was incomplete or truncated",
    )


def test_another_adapter_version_needs_a_recheck() -> None:
    """A baseline of another adapter or compiler version is never compared as current."""
    tree = ts_view(TREE)
    baseline = _baseline(tree, analyzer_version="typescript_boundary/0 typescript/5.8.0")
    assert check_dependency(0, baseline, tree).state == "needs_recheck"


def test_fingerprint_covers_typescript_inputs_only() -> None:
    """The cheap fingerprint changes with a .ts or .json file, not with a README or a file
    under node_modules."""
    base = typescript_domain("**", ts_view(TREE)).content_digest
    for extra, moves in [
        ({"README.md": b"changed\n"}, False),
        ({"node_modules/x/index.ts": b"x\n"}, False),
        ({"src/b.ts": b"export {}\n"}, True),
        ({"tsconfig.json": b"{}\n"}, True),
    ]:
        digest = typescript_domain("**", ts_view({**TREE, **extra})).content_digest
        assert (digest != base) is moves, extra


def test_claim_on_an_incomplete_boundary_is_refused_at_birth() -> None:
    """A query_set on a boundary that is not complete (here: over the input cap, so the
    worker never starts) is refused unless explicitly allowed, then stale from birth."""
    files = {f"src/f{i}.ts": b"export {}\n" for i in range(10_001)}
    tree = ts_view(files)
    dependency = Dependency.model_validate(DEPENDENCY)
    with pytest.raises(
        InvalidClaim, match=r"dependencies\[0\]\.query_set: the result is incomplete"
    ):
        compute_baseline(0, dependency, tree)
    baseline = compute_baseline(0, dependency, tree, allow_incomplete=True)
    assert isinstance(baseline, QueryBaseline)
    assert baseline.boundary is not None
    assert baseline.boundary["status"] == "unavailable"
    assert check_dependency(0, baseline, tree).state == "needs_recheck"


@pytest.mark.usefixtures("runtime")
def test_negative_boundary_stays_empty_until_a_consumer_appears_through_an_alias() -> None:
    """ "Nothing calls chargeCard": an edit that adds no consumer keeps it current; a call
    through a barrel's alias (the name chargeCard nowhere in the new file) reopens it."""
    payments = b"export function chargeCard(n: number): boolean {\n  return n > 0;\n}\n"
    files = {"tsconfig.json": b'{"include": ["src"]}\n', "src/payments.ts": payments}
    dependency = Dependency.model_validate(
        {"negative_query": {"query": {"kind": "typescript_boundary", "symbol": "chargeCard"}}}
    )
    baseline = compute_baseline(0, dependency, ts_view(files))
    barrel = {"src/index.ts": b'export * as billing from "./payments";\n'}
    quiet = check_dependency(0, baseline, ts_view({**files, **barrel}))
    assert (quiet.state, quiet.reason) == ("current", "re-evaluated; still no consumer")
    caller = b'import { billing } from "./index";\n\nbilling.chargeCard(-1);\n'
    edited = ts_view({**files, **barrel, "src/refund.ts": caller})
    check = check_dependency(0, baseline, edited)
    assert (check.state, check.reason) == ("needs_recheck", "a match appeared: src/refund.ts")
