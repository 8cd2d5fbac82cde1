"""Queue throughput: probes through Redis + PostgreSQL with 2 worker processes, beside a
dramatiq no-op actor on the same broker and the same probes run inline one at a time.

Run: ``.venv/bin/python benchmarks/queue_bench.py [--probes 1000] [--inline 100]``.
Needs PostgreSQL (``PROBE_TEST_DATABASE_URL``) and Redis (``PROBE_TEST_REDIS_URL``); it
works in a fresh PostgreSQL schema and its own Redis namespace, both removed afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import dramatiq
import redis
from _common import machine_note
from dramatiq.brokers.redis import RedisBroker
from sqlalchemy import create_engine, select, text

from probe_service.plans import Plan, parse_plan
from probe_service.queue import InlineQueue, ProbeQueue, batch_counts, submit_plans
from probe_service.queue.inline import run_inline
from probe_service.queue.sizing import worker_size
from probe_service.queue.tables import runs
from probe_service.settings import read_settings
from probe_service.snapshot import snapshot_capture
from probe_service.store import Store, open_store

POLICY_ID = "bench-true"
DEFAULT_DB = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
DEFAULT_REDIS = "redis://127.0.0.1:6379/0"
#: Threads per worker process; None: the process's default size from the machine
#: (``queue/sizing.py``: two threads per launch lane, a lane per usable core).
PROCESSES, THREADS = 2, None


def farm_env(redis_url: str, namespace: str, pg_url: str, policy: Path) -> dict[str, str]:
    """The environment the bench's worker processes start with: this one, pointed at the
    bench's broker namespace, store schema and policy file."""
    return {
        **os.environ,
        "PROBE_REDIS_URL": redis_url,
        "PROBE_REDIS_NAMESPACE": namespace,
        "PROBE_DATABASE_URL": pg_url,
        "BYTE_PROBE_POLICY_FILE": str(policy),
    }


@contextmanager
def fresh_schema(base_url: str) -> Iterator[str]:
    """A URL whose search_path is a new schema, dropped on exit."""
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base_url)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    sep = "&" if "?" in base_url else "?"
    try:
        yield f"{base_url}{sep}options={quote(f'-csearch_path={schema}')}"
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def drop_namespace(url: str, namespace: str) -> None:
    """Delete every Redis key of ``namespace``."""
    client = redis.Redis.from_url(url)
    keys = list(client.scan_iter(f"{namespace}*"))
    if keys:
        client.delete(*keys)
    client.close()


def write_policy(directory: Path) -> Path:
    """A policy file allowing only ``true``; named by BYTE_PROBE_POLICY_FILE here too."""
    path = directory / "probe-policies.json"
    policy = {
        "id": POLICY_ID,
        "allowed_executables": ["true"],
        "timeout_seconds": 30,
        "max_output_bytes": 10_000,
        "allowed_domains": [],
        "environment": ["PATH"],
    }
    path.write_text(json.dumps({"schema": 1, "policies": [policy]}))
    path.chmod(0o600)
    os.environ["BYTE_PROBE_POLICY_FILE"] = str(path)
    return path


def true_plans(snapshot_id: str, tag: str, count: int) -> list[Plan | str]:
    """``count`` distinct plans (by argument), so the action cache never short-circuits."""
    return [
        parse_plan(
            {
                "snapshot_id": snapshot_id,
                "policy_id": POLICY_ID,
                "executable": "true",
                "args": [f"{tag}-{i}"],
                "oracle": {
                    "check": {"kind": "exit_code", "equals": 0},
                    "source": "user_requirement",
                    "reference": "benchmark",
                },
            }
        )
        for i in range(count)
    ]


def threads_per_process() -> int:
    """The threads each worker process runs: ``THREADS``, else its default size."""
    return THREADS if THREADS is not None else worker_size().threads


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by the inclusive method."""
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def start_workers(env: dict[str, str], root: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """Start `byte-probe worker --processes 2` and wait until both processes are ready."""
    log = root / "workers.log"
    argv = [sys.executable, "-m", "probe_service.cli", "worker", "--metrics-port", "0"]
    argv += ["--processes", str(PROCESSES), "--root", str(root)]
    if THREADS is not None:
        argv += ["--threads", str(THREADS)]
    with open(log, "wb") as out:
        farm = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while log.read_text(errors="replace").count(" ready: ") < PROCESSES:
        if time.monotonic() > deadline or farm.poll() is not None:
            raise SystemExit(f"workers never became ready:\n{log.read_text(errors='replace')}")
        time.sleep(0.1)
    return farm, log


def stop_workers(farm: subprocess.Popen[bytes]) -> None:
    """SIGTERM the supervisor and wait for it."""
    farm.send_signal(signal.SIGTERM)
    try:
        farm.wait(timeout=60)
    except subprocess.TimeoutExpired:
        farm.kill()
        farm.wait()


def bench_queue(store: Store, queue: ProbeQueue, snapshot_id: str, count: int) -> dict[str, float]:
    """Submit ``count`` probes and wait for every receipt; throughput and latencies."""
    items = true_plans(snapshot_id, "queue", count)
    started = time.perf_counter()
    batch_id = submit_plans(store, queue, items, POLICY_ID).batch_id
    while batch_counts(store, batch_id).get("done", 0) < count:
        time.sleep(0.1)
    elapsed = time.perf_counter() - started
    with store.reading() as conn:
        rows = conn.execute(
            select(runs.c.finished_ms - runs.c.submitted_ms, runs.c.outcome).where(
                runs.c.batch_id == batch_id
            )
        ).all()
    latencies = [ms / 1000 for ms, _ in rows]
    supports = sum(1 for _, outcome in rows if outcome == "supports")
    return {
        "seconds": elapsed,
        "per_s": count / elapsed,
        "p50": percentile(latencies, 50),
        "p95": percentile(latencies, 95),
        "supports": supports,
    }


def bench_dramatiq_noop(url: str, namespace: str, count: int) -> dict[str, float]:
    """A no-op actor on a real RedisBroker: enqueue ``count``, drain with 4 threads."""
    broker = RedisBroker(url=url, namespace=namespace)
    done = threading.Event()
    seen = [0]
    lock = threading.Lock()

    @dramatiq.actor(broker=broker, actor_name="bench_noop", queue_name="bench")
    def noop(i: int) -> None:
        with lock:
            seen[0] += 1
            if seen[0] == count:
                done.set()

    started = time.perf_counter()
    for i in range(count):
        noop.send(i)
    enqueued = time.perf_counter() - started
    worker = dramatiq.Worker(broker, worker_threads=PROCESSES * threads_per_process())
    worker.start()
    done.wait()
    elapsed = time.perf_counter() - started
    worker.stop()
    broker.close()
    return {"seconds": elapsed, "per_s": count / elapsed, "enqueue_s": enqueued}


def bench_inline(store: Store, snapshot_id: str, count: int) -> dict[str, float]:
    """The same kind of probes run in this process, one after another."""
    items = true_plans(snapshot_id, "inline", count)
    started = time.perf_counter()
    run_ids = submit_plans(store, InlineQueue(read_settings()), items, POLICY_ID).run_ids
    outcomes = run_inline(store, run_ids, threads=1)
    elapsed = time.perf_counter() - started
    return {
        "seconds": elapsed,
        "per_s": count / elapsed,
        "supports": sum(1 for o in outcomes if o == "supports"),
    }


def main() -> None:
    """Run the three measurements and print them side by side."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--probes", type=int, default=1000, help="Probes through the queue.")
    parser.add_argument("--inline", type=int, default=100, help="Probes run inline.")
    args = parser.parse_args()
    db_url = os.environ.get("PROBE_TEST_DATABASE_URL", DEFAULT_DB)
    redis_url = os.environ.get("PROBE_TEST_REDIS_URL", DEFAULT_REDIS)
    namespace = f"bench-{uuid.uuid4().hex[:12]}"
    with tempfile.TemporaryDirectory() as tmp, fresh_schema(db_url) as pg_url:
        root = Path(tmp)
        policy = write_policy(root)
        (root / "src").mkdir()
        (root / "src" / "hello.txt").write_text("hello\n")
        store = open_store(root, pg_url)
        snapshot_id = snapshot_capture(store, root / "src").snapshot_id
        env = farm_env(redis_url, namespace, pg_url, policy)
        queue = ProbeQueue(redis_url, namespace=namespace)
        farm, _ = start_workers(env, root)
        try:
            queued = bench_queue(store, queue, snapshot_id, args.probes)
        finally:
            stop_workers(farm)
            queue.close()
        noop = bench_dramatiq_noop(redis_url, f"{namespace}-noop", args.probes)
        inline = bench_inline(store, snapshot_id, args.inline)
        store.close()
    for ns in (namespace, f"{namespace}-noop"):
        drop_namespace(redis_url, ns)
    print(f"machine: {machine_note()}")
    threads = threads_per_process()
    print(f"workers: {PROCESSES} processes x {threads} threads; probe: /bin/true, exit_code")
    print(
        f"queue (Redis + PostgreSQL, {args.probes} probes): {queued['per_s']:.1f} probes/s "
        f"({queued['seconds']:.1f} s), submit-to-receipt p50 {queued['p50']:.2f} s "
        f"p95 {queued['p95']:.2f} s, supports {queued['supports']:.0f}/{args.probes}"
    )
    print(
        f"dramatiq no-op actor (same Redis, {args.probes} messages, "
        f"{PROCESSES * threads_per_process()} threads): {noop['per_s']:.0f} msgs/s "
        f"({noop['seconds']:.2f} s incl. {noop['enqueue_s']:.2f} s enqueue)"
    )
    print(
        f"inline, one at a time ({args.inline} probes — smaller N): {inline['per_s']:.2f} "
        f"probes/s ({inline['seconds']:.1f} s), supports {inline['supports']:.0f}/{args.inline}"
    )


if __name__ == "__main__":
    main()
