"""Every route to a symbol, through the real worker in the real sandbox (the route corpus:
tests/typescript/corpus.py).

For each route, the edited snapshot's boundary is complete and lists the consumer the edit
added (an incomplete answer does not pass), every reference the TypeScript language
service's own findReferences / getImplementationAtPosition finds (run independently, on
the same files) lies inside a site of the boundary, and a claim made before the edit does
not stay current after it: through change_analyze, claim_check and gate in turn. Each
decoy edit leaves such a claim current.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from probe_service.claims import change_analyze, claim_check, claim_create, gate
from probe_service.claims.receipts import no_receipts
from probe_service.sandbox import SandboxRuntime
from probe_service.snapshot import snapshot_capture
from probe_service.store import Store
from probe_service.typescript.boundary import typescript_boundary
from probe_service.typescript.install import default_worker_dir
from probe_service.typescript.models import BoundaryResult, BoundarySite
from tests.conftest import make_searchable

from .conftest import TS_CALLER
from .corpus import BASE, DECOYS, ROUTES, Route, overlay, write_project

# Three sandboxed compiler runs per route (2-3 s each): out of the quick loop, in `make test`.
pytestmark = pytest.mark.slow

LANGUAGE_SERVICE = Path(__file__).with_name("ls_references.cjs")
#: How a route's claim is rechecked on the edited snapshot, in turn.
OPERATIONS = ("change_analyze", "claim_check", "gate")


@dataclass(frozen=True)
class Captured:
    before: str
    after: str
    after_dir: Path


def _capture(store: Store, root: Path, files: dict[str, str]) -> str:
    write_project(root, files)
    make_searchable(root)
    return snapshot_capture(store, root).snapshot_id


@pytest.fixture(scope="module")
def corpus(module_store: Store, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Captured]:
    """Every route's project captured before and after its edit."""
    work = tmp_path_factory.mktemp("routes")
    captured = {}
    for name, route in ROUTES.items():
        before = _capture(module_store, work / name / "before", overlay(BASE, route.before))
        after_dir = work / name / "after"
        after = _capture(module_store, after_dir, overlay(BASE, route.before, route.edit))
        captured[name] = Captured(before, after, after_dir)
    return captured


@pytest.fixture(scope="module")
def language_service(corpus: dict[str, Captured]) -> dict[str, list[dict[str, Any]]]:
    """The language service's references and implementations on every edited project."""
    node = shutil.which("node")
    assert node is not None, "node is needed (make setup)"
    names = sorted(ROUTES)
    requests = [
        {"root": str(corpus[n].after_dir), "symbol": ROUTES[n].symbol, "file": ROUTES[n].file}
        for n in names
    ]
    typescript = default_worker_dir() / "node_modules" / "typescript"
    done = subprocess.run(
        [node, str(LANGUAGE_SERVICE), str(typescript)],
        input=json.dumps(requests),
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return dict(zip(names, json.loads(done.stdout), strict=True))


def _claim(store: Store, snapshot_id: str, route: Route, scope: str) -> str:
    query = {"kind": "typescript_boundary", "symbol": route.symbol, "file": route.file}
    request = {
        "scope": scope,
        "statement": f"every consumer of {route.symbol} checks its result",
        "kind": "behavior",
        "snapshot_id": snapshot_id,
        "dependencies": [{"query_set": {"query": query}}],
    }
    return claim_create(store, request, receipts=no_receipts, caller=TS_CALLER).claim_id


def _sites(result: BoundaryResult) -> tuple[BoundarySite, ...]:
    return (*result.definitions, *result.consumers, *result.implementations)


def _text(root: Path, site: BoundarySite) -> str:
    return (root / site.path).read_bytes()[site.start : site.end].decode()


def _state_after(
    operation: str, store: Store, claim_id: str, captured: Captured, scope: str
) -> str:
    """The claim's applicability on the edited snapshot, as ``operation`` decides it."""
    if operation == "change_analyze":
        analysis = change_analyze(
            store, captured.before, captured.after, scope=scope, caller=TS_CALLER
        )
        assert [o.claim_id for o in analysis.opened] == [claim_id]
        return analysis.checks[0].state
    if operation == "claim_check":
        [check] = claim_check(store, [claim_id], captured.after, caller=TS_CALLER)
        return check.state
    result = gate(store, captured.after, scope=scope, caller=TS_CALLER)
    assert not result.passed
    [obligation] = result.open_obligations
    assert obligation.claim_id == claim_id
    return obligation.applicability


@pytest.mark.parametrize("name", sorted(ROUTES))
def test_route_is_followed(
    name: str,
    corpus: dict[str, Captured],
    language_service: dict[str, list[dict[str, Any]]],
    module_store: Store,
    runtime: SandboxRuntime,
) -> None:
    """The edit's consumer is in a complete boundary, the language service's references
    are all inside it, and the claim made before the edit is reopened by it."""
    route, captured = ROUTES[name], corpus[name]
    claim_id = _claim(module_store, captured.before, route, scope=name)
    result = typescript_boundary(
        module_store, captured.after, route.symbol, route.file, runtime=runtime
    )
    assert result.status == "complete", result.unknowns
    path, role, text = route.consumer
    listed = [(s.path, s.role, _text(captured.after_dir, s)) for s in _sites(result)]
    assert (path, role, text) in listed, listed
    references = language_service[name]
    assert references, "the language service found nothing: the lower bound is empty"
    for ref in references:
        assert any(
            s.path == ref["path"] and s.start <= ref["start"] and ref["end"] <= s.end
            for s in _sites(result)
        ), f"the language service's {ref} is not in the boundary: {listed}"
    operation = OPERATIONS[sorted(ROUTES).index(name) % len(OPERATIONS)]
    assert _state_after(operation, module_store, claim_id, captured, name) == "needs_recheck"


@pytest.fixture(scope="module")
def base_claim(module_store: Store, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A claim on the base project: (its snapshot, its id)."""
    root = tmp_path_factory.mktemp("decoys") / "base"
    snapshot = _capture(module_store, root, overlay(BASE))
    route = Route(before={}, edit={}, consumer=("", "", ""))
    return snapshot, _claim(module_store, snapshot, route, scope="decoys")


@pytest.mark.parametrize("decoy", sorted(DECOYS))
def test_decoy_leaves_the_claim_current(
    decoy: str,
    base_claim: tuple[str, str],
    module_store: Store,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A comment naming chargeCard, a same-named local in another scope and an unrelated
    chargeCardLike add no consumer: the compiler reruns, and the claim stays current."""
    base, claim_id = base_claim
    root = tmp_path_factory.mktemp("decoy") / decoy
    edited = _capture(module_store, root, overlay(BASE, DECOYS[decoy]))
    analysis = change_analyze(module_store, base, edited, scope="decoys", caller=TS_CALLER)
    assert analysis.opened == ()
    [check] = analysis.checks
    assert check.claim_id == claim_id
    assert check.state == "current", check.reasons
    assert check.dependencies[0].reason == "domain changed; result re-evaluated and unchanged"
