"""Benchmark: change_analyze (dependency index) against a brute-force recheck of every claim.

10,000 claims over a 5,000-file repository (100 packages of 50 modules); one change touches
10 files. Each claim depends on one exact file and one grep query (query_set or
negative_query, half each) whose domain is ten modules of one package, e.g.
``pkg042/mod3*.py``. Both sides start from a fresh SnapshotSource (cold snapshot and blob
caches) in the same run, and the benchmark asserts that they find the same stale claims.

    python benchmarks/claims_bench.py [--files 5000] [--claims 10000] [--changed 10]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from probe_service.claims import (
    SnapshotSource,
    TreeView,
    change_analyze,
    claim_check,
    claim_create,
    evaluate_query,
)
from probe_service.claims.checking import evaluate_claims
from probe_service.claims.records import ExactBlobBaseline
from probe_service.claims.rows import load_baselines, load_heads
from probe_service.claims.views import entry_fingerprint
from probe_service.snapshot import snapshot_capture
from probe_service.store import Store, open_store

PER_DIR = 50


def build_repo(root: Path, files: int) -> list[str]:
    paths = []
    for i in range(files):
        path = f"pkg{i // PER_DIR:03d}/mod{i % PER_DIR:02d}.py"
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f"def f{i}(x):\n    return parse(x) + {i}\n")
        paths.append(path)
    return paths


def dependencies(rng: random.Random, paths: list[str], dirs: int) -> list[dict[str, object]]:
    """One exact file plus one query over ten modules of one package (50/50 set/negative)."""
    domain = f"pkg{rng.randrange(dirs):03d}/mod{rng.randrange(5)}*.py"
    if rng.random() < 0.5:
        query: dict[str, object] = {
            "query_set": {"query": {"kind": "grep", "pattern": "parse(", "domain": domain}}
        }
    else:
        negative = {"kind": "grep", "pattern": "legacy_parse", "domain": domain}
        query = {"negative_query": {"query": negative}}
    return [{"exact_blob": {"path": rng.choice(paths)}}, query]


def create_claims(
    store: Store, snap: str, paths: list[str], count: int, start: int = 0
) -> list[str]:
    """Create claims ``start`` .. ``start + count - 1`` (the same ones in every run)."""
    rng = random.Random(6 + start)
    source = SnapshotSource(store)
    dirs = len(paths) // PER_DIR
    ids = []
    for n in range(start, start + count):
        request = {
            "scope": f"scope{n % 4}",
            "statement": f"claim {n}",
            "kind": "behavior",
            "snapshot_id": snap,
            "dependencies": dependencies(rng, paths, dirs),
        }
        ids.append(claim_create(store, request, receipts=lambda _r: None, source=source).claim_id)
    return ids


def brute_force_evaluate(store: Store, ids: list[str], target: str) -> int:
    """Our own full recheck of every claim (index-free, but with its shortcuts), no writes."""
    with store.reading() as conn:
        heads = load_heads(conn, ids)
        baselines = load_baselines(conn, ids)
    checks = evaluate_claims(heads, baselines, target, SnapshotSource(store))
    return sum(c.state != "current" for c in checks)


def brute_force_recompute(store: Store, ids: list[str], target: str) -> set[str]:
    """Brute force: recompute every dependency of every claim from the target snapshot
    (fresh domain scan and query evaluation per dependency, no index, no memo; blob bytes
    are cached, as any implementation would) and compare with the stored baseline."""
    with store.reading() as conn:
        baselines = load_baselines(conn, ids)
    tree = SnapshotSource(store).require(target)
    blobs: dict[str, bytes] = {}

    def read(digest: str) -> bytes:
        if digest not in blobs:
            blobs[digest] = tree.read_blob(digest)
        return blobs[digest]

    stale = set()
    for claim_id, deps in baselines.items():
        for dep in deps:
            if isinstance(dep, ExactBlobBaseline):
                if entry_fingerprint(tree.entries.get(dep.path)) != dep.fingerprint:
                    stale.add(claim_id)
                continue
            result = evaluate_query(dep.query, TreeView(target, tree.entries, read))
            holds = (
                result.result_digest == dep.result_digest
                if dep.form == "query_set"
                else dep.complete and result.complete and not result.matches
            )
            if not holds:
                stale.add(claim_id)
    return stale


T = TypeVar("T")


def timed(label: str, fn: Callable[[], T]) -> tuple[float, T]:
    start = time.perf_counter()
    result = fn()
    elapsed = time.perf_counter() - start
    print(f"{label:<58} {elapsed * 1000:10.1f} ms")
    return elapsed, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--claims", type=int, default=10_000)
    parser.add_argument("--changed", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root, state = Path(tmp) / "repo", Path(tmp) / "state"
        root.mkdir()
        state.mkdir()
        store = open_store(state)
        paths = build_repo(root, args.files)
        _, before = timed("capture (before)", lambda: snapshot_capture(store, root).snapshot_id)
        _, ids = timed(
            f"create {args.claims} claims", lambda: create_claims(store, before, paths, args.claims)
        )
        for path in random.Random(7).sample(paths, args.changed):
            (root / path).write_text("def changed():\n    return legacy_parse()\n")
        _, after = timed("capture (after)", lambda: snapshot_capture(store, root).snapshot_id)
        fast, analysis = timed(
            "change_analyze (index)", lambda: change_analyze(store, before, after)
        )
        brute, stale = timed(
            "brute force: recompute every dependency of every claim",
            lambda: brute_force_recompute(store, ids, after),
        )
        ours, checks = timed(
            "full recheck: claim_check of every claim (recorded)",
            lambda: claim_check(store, ids, after),
        )
        pure, _ = timed(
            "full recheck: evaluation only, no writes",
            lambda: brute_force_evaluate(store, ids, after),
        )
        opened = {o.claim_id for o in analysis.opened}
        assert len(analysis.changed_paths) == args.changed
        assert opened == stale == {c.claim_id for c in checks if c.state != "current"}
        print(f"candidates {analysis.candidates}, obligations opened {len(opened)}, agree: yes")
        print(f"speed-up vs brute-force recomputation: {brute / fast:6.1f}x  (goal >= 50x)")
        print(f"speed-up vs claim_check of every claim: {ours / fast:6.1f}x")
        print(f"speed-up vs evaluation only:            {pure / fast:6.1f}x")
        store.close()


if __name__ == "__main__":
    main()
