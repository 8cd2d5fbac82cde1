"""Server time of the web view's pages on a store of 100,000 runs.

Fills a store in bulk (plans, runs of a farm, their receipts; one transaction per chunk,
no probe executed: the figures are about reading), serves the view on a loopback port and
times whole HTTP requests (the handler, the operation table, the store and the template):
the runs list, a filtered list, a second page, a receipt page and the farm page. The goal
is at most 200 ms per page (docs/ARCHITECTURE.md, "Web view").

Usage: python benchmarks/web_bench.py [--runs 100000] [--database-url postgresql+psycopg://…]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import uvicorn
from _common import machine_note

from probe_service.plans.tables import plans, receipts
from probe_service.queue.tables import runs
from probe_service.service import ProbeService
from probe_service.store import open_store
from probe_service.web import create_app
from probe_service.web.server import allowed_hosts

OUTCOMES = [
    ("supports", "oracle_passed"),
    ("refutes", "oracle_failed"),
    ("inconclusive", "model_inferred_oracle"),
    ("inconclusive", "timeout"),
]
CHUNK = 5000


def _hex(n: int = 64) -> str:
    return "".join(random.choice("0123456789abcdef") for _ in range(n))


def fill(svc: ProbeService, n_runs: int) -> dict[str, str]:
    """Insert ``n_runs`` runs over 200 plans, 20 snapshots and 4 policies; return ids to ask."""
    snapshots = [_hex() for _ in range(20)]
    policies = [f"policy-{i}" for i in range(4)]
    plan_rows = []
    for i in range(200):
        body = {"snapshot_id": snapshots[i % 20], "policy_id": policies[i % 4], "args": [str(i)]}
        plan_rows.append({"plan_id": _hex(), "body": json.dumps(body), "created_at": "x"})
    now = int(time.time() * 1000)
    start = now - 20 * 3_600_000
    batch = uuid.uuid4().hex
    picked: dict[str, str] = {"snapshot_id": snapshots[3], "policy_id": policies[1]}
    with svc.store.transaction() as conn:
        conn.execute(plans.insert(), plan_rows)
    for offset in range(0, n_runs, CHUNK):
        run_rows, receipt_rows = [], []
        for seq in range(offset, min(n_runs, offset + CHUNK)):
            plan = plan_rows[seq % 200]
            body = json.loads(plan["body"])
            submitted = start + seq * (now - start) // n_runs
            state = "done" if seq < n_runs - 300 else ("running" if seq % 2 else "queued")
            outcome, reason = OUTCOMES[seq % 4]
            run_id = uuid.uuid4().hex
            sha = _hex() if state == "done" else None
            run_rows.append(
                {
                    "run_id": run_id,
                    "batch_id": batch,
                    "seq": seq,
                    "plan_id": plan["plan_id"],
                    "policy_id": body["policy_id"],
                    "state": state,
                    "attempts": 1,
                    "lease_owner": f"worker-{seq % 7}" if state == "running" else None,
                    "lease_expires_ms": now + 60_000 if state == "running" else None,
                    "receipt_sha256": sha,
                    "outcome": outcome if state == "done" else None,
                    "reason": reason if state == "done" else None,
                    "submitted_ms": submitted,
                    "finished_ms": submitted + 1500 + seq % 900 if state == "done" else None,
                    "reuse": True,
                }
            )
            if sha is not None:
                receipt = {
                    "committed": {"outcome": outcome, "reason": reason, "plan_id": plan["plan_id"]},
                    "field_digests": {},
                    "operational": {
                        "worker": f"worker-{seq % 7}",
                        "stdout_b64": "aGVsbG8K",
                        "phases": {"materialize": 0.01, "launch": 0.2, "execute": 0.05},
                    },
                    "receipt_sha256": sha,
                }
                created = (
                    time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((submitted + 1500) / 1000))
                    + f".{(submitted % 1000) * 1000:06d}+00:00"
                )
                receipt_rows.append(
                    {
                        "run_id": run_id,
                        "receipt_sha256": sha,
                        "plan_id": plan["plan_id"],
                        "action_key": _hex(),
                        "outcome": outcome,
                        "reason": reason,
                        "reusable": True,
                        "body": json.dumps(receipt) + " " * 1500,  # a receipt's usual size
                        "created_at": created,
                    }
                )
        # One run in a hundred ran in a process: a receipt without a run row.
        for row in receipt_rows[::100]:
            receipt_rows.append({**row, "run_id": uuid.uuid4().hex, "receipt_sha256": _hex()})
        with svc.store.transaction() as conn:
            conn.execute(runs.insert(), run_rows)
            if receipt_rows:
                conn.execute(receipts.insert(), receipt_rows)
        if offset == CHUNK:
            picked["run_id"] = run_rows[17]["run_id"]
    return picked


def serve(svc: ProbeService) -> tuple[str, uvicorn.Server, threading.Thread]:
    """The view on a free loopback port."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    app = create_app(svc, hosts=allowed_hosts("127.0.0.1", port))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}", server, thread


def timed(url: str, repeat: int) -> dict[str, float]:
    """Median and 95th percentile (ms) of ``repeat`` GETs of ``url`` after one warm-up."""
    samples = []
    for i in range(repeat + 1):
        began = time.perf_counter()
        with urllib.request.urlopen(url, timeout=60) as response:  # noqa: S310 (loopback)
            response.read()
            assert response.status == 200, url
        if i:
            samples.append((time.perf_counter() - began) * 1000)
    samples.sort()
    return {
        "median_ms": round(statistics.median(samples), 1),
        "p95_ms": round(samples[int(0.95 * (len(samples) - 1))], 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/web_bench.json"))
    args = parser.parse_args()
    random.seed(7)
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(Path(tmp), args.database_url)
        svc = ProbeService(store, interface="host")
        began = time.perf_counter()
        picked = fill(svc, args.runs)
        fill_s = time.perf_counter() - began
        if store.dialect_name == "postgresql":
            # What autovacuum does within a minute of a bulk load: statistics for the
            # planner and a visibility map for index-only scans.
            with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                for table in ("runs", "receipts", "plans", "inprocess_runs", "farm_minutes"):
                    conn.exec_driver_sql(f"VACUUM ANALYZE {table}")
        base, server, thread = serve(svc)
        first = svc.run_list(limit=50).next_cursor or ""
        pages = {
            "runs list": "/runs",
            "runs list, page 2": f"/runs?cursor={first}",
            "filtered: outcome=refutes": "/runs?outcome=refutes",
            "filtered: snapshot": f"/runs?snapshot_id={picked['snapshot_id']}",
            "filtered: policy + outcome": f"/runs?policy_id={picked['policy_id']}&outcome=refutes",
            "filtered: state=queued": "/runs?state=queued",
            "filtered: nothing matches": f"/runs?policy_id={picked['policy_id']}&reason=timeout",
            "receipt page": f"/runs/{picked['run_id']}",
            "farm page": "/",
        }
        results: dict[str, Any] = {
            "runs": args.runs,
            "backend": store.dialect_name,
            "fill_seconds": round(fill_s, 1),
            "machine": machine_note(),
            "pages": {name: timed(base + path, args.repeat) for name, path in pages.items()},
        }
        server.should_exit = True
        thread.join(timeout=30)
        svc.close()
    print(json.dumps(results, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    worst = max(p["median_ms"] for p in results["pages"].values())
    print(f"worst median {worst} ms (goal: at most 200 ms per page)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
