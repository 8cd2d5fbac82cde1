"""The TypeScript inputs follow the snapshot link rule (docs/ARCHITECTURE.md, "Snapshot
links"): a link that stays inside, dangles or loops is recreated in the worker's
materialization as a run's tree has it; one that escapes never is. Every link stays an
explicit unknown, since the worker does not follow a link as an alias of its target.

Before: no link of the TypeScript inputs was recreated at all, while a run's tree kept the
internal ones; the rule was another one.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from probe_service.claims.queries import typescript_domain
from probe_service.claims.sources import SnapshotSource
from probe_service.sandbox import SandboxRuntime
from probe_service.snapshot import snapshot_capture
from probe_service.store import Store
from probe_service.typescript.boundary import typescript_boundary
from probe_service.typescript.worker import WorkerAnswer, _write_inputs
from tests.conftest import make_searchable

LINKS = {
    "src/alias.ts": "payments.ts",
    "src/loop1.ts": "loop2.ts",
    "src/loop2.ts": "loop1.ts",
    "src/gone.ts": "missing.ts",
    "src/host.ts": "/etc/hostname",
}


def _repo(root: Path) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "src" / "payments.ts").write_text(
        "export function chargeCard(n: number): number {\n  return n;\n}\n"
    )
    (root / "src" / "app.ts").write_text(
        'import { chargeCard } from "./payments";\nchargeCard(1);\n'
    )
    for path, target in LINKS.items():
        os.symlink(target, root / path)
    make_searchable(root)
    return root


def test_the_materialization_keeps_internal_links_and_drops_escaping_ones(
    sqlite_store: Store, tmp_path: Path
) -> None:
    """alias, loop and dangling links are recreated with their targets; the absolute one
    is not; a span in the alias has its target's bytes; every link is listed."""
    snapshot_id = snapshot_capture(sqlite_store, _repo(tmp_path / "repo")).snapshot_id
    tree = SnapshotSource(sqlite_store).require(snapshot_id)
    answer = WorkerAnswer()
    out = tmp_path / "inputs"
    _write_inputs(typescript_domain("**", tree), tree, out, answer)
    kept = {p: os.readlink(out / p) for p in LINKS if (out / p).is_symlink()}
    assert kept == {p: t for p, t in LINKS.items() if p != "src/host.ts"}
    assert not os.path.lexists(out / "src/host.ts")
    assert answer.files["src/alias.ts"] == answer.files["src/payments.ts"]
    assert sorted(answer.skipped_links) == sorted(LINKS)


@pytest.mark.slow
def test_the_worker_runs_on_a_tree_with_a_loop(
    sqlite_store: Store, tmp_path: Path, runtime: SandboxRuntime
) -> None:
    """A loop in the inputs does not stop the worker: it answers, finds the caller, and
    names each link as an unknown (so the boundary is not complete)."""
    snapshot_id = snapshot_capture(sqlite_store, _repo(tmp_path / "repo")).snapshot_id
    result = typescript_boundary(sqlite_store, snapshot_id, "chargeCard", runtime=runtime)
    assert result.status == "incomplete", (result.status, result.unknowns)
    assert ("src/app.ts", "call") in {(s.path, s.role) for s in result.consumers}
    assert {f"symbolic link not followed: {p}" for p in LINKS} <= set(result.unknowns)
