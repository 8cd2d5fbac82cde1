"""``gc`` on the web view's store of 100,000 runs with half of them aged past retention.

Fills the store as ``web_bench.py`` does (runs of a farm with their receipts, one run in a
hundred in-process), the first half 40 days in the past, then times the web view's pages,
``gc --dry-run`` and ``gc`` (retention: 30 days for runs, receipts and envelopes), and the
pages again. Reports rows and bytes reclaimed per kind. The fill has no snapshots, blobs
or events of its own and its plans stay young (as in ``web_bench.py``): the figures are
about runs and receipts, the bulk of a farm's store.

Usage: python benchmarks/gc_bench.py [--runs 100000] [--database-url postgresql+psycopg://…]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import web_bench
from _common import machine_note

from probe_service.policies.retention import Retention
from probe_service.retention import collect_garbage
from probe_service.service import ProbeService
from probe_service.store import open_store

RETENTION = Retention(runs_days=30, receipts_days=30, envelopes_days=30, batch_rows=2000)
AGE_S = 40 * 86_400
PAGES = {"runs list": "/runs", "filtered: outcome=refutes": "/runs?outcome=refutes", "farm": "/"}


def _aged_time() -> SimpleNamespace:
    """``time`` as ``web_bench.fill`` uses it, AGE_S in the past."""
    return SimpleNamespace(
        time=lambda: time.time() - AGE_S, strftime=time.strftime, gmtime=time.gmtime
    )


def _pages(svc: ProbeService, repeat: int) -> dict[str, float]:
    base, server, thread = web_bench.serve(svc)
    try:
        return {
            name: web_bench.timed(base + path, repeat)["median_ms"] for name, path in PAGES.items()
        }
    finally:
        server.should_exit = True
        thread.join()


def measure(runs: int, database_url: str | None, repeat: int = 10) -> dict[str, Any]:
    """Fill, time pages, gc --dry-run, gc, pages again; the figures as one document."""
    random.seed(7)
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(Path(tmp), database_url)
        svc = ProbeService(store, interface="host")
        began = time.perf_counter()
        real_time = web_bench.time
        web_bench.time = _aged_time()  # type: ignore[assignment]
        try:
            web_bench.fill(svc, runs // 2)
        finally:
            web_bench.time = real_time
        web_bench.fill(svc, runs - runs // 2)
        fill_s = time.perf_counter() - began
        before = _pages(svc, repeat)
        began = time.perf_counter()
        dry = collect_garbage(store, RETENTION, holder="bench", dry_run=True)
        dry_s = time.perf_counter() - began
        began = time.perf_counter()
        done = collect_garbage(store, RETENTION, holder="bench")
        gc_s = time.perf_counter() - began
        after = _pages(svc, repeat)
        backend = store.dialect_name
        store.close()
    return {
        "runs": runs,
        "backend": backend,
        "fill_s": round(fill_s, 2),
        "dry_run_s": round(dry_s, 2),
        "gc_s": round(gc_s, 2),
        "batches": done.batches,
        "planned": {k.kind: k.model_dump() for k in dry.kinds if k.removed},
        "removed": {k.kind: k.model_dump() for k in done.kinds if k.removed},
        "pages_before_ms": before,
        "pages_after_ms": after,
        "machine": machine_note(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/gc_bench.json"))
    args = parser.parse_args()
    result = measure(args.runs, args.database_url, args.repeat)
    args.out.parent.mkdir(exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
