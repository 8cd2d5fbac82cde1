"""SIGKILL ``gc`` at seeded statements while a writer cites old objects in new claims;
nothing reachable is lost and nothing is half removed (docs/ARCHITECTURE.md, "Retention
and gc").

Each attempt builds a few more aged runs, starts a writer process that keeps creating
claims citing the farm's receipts and snapshots, and runs gc in a forked child that
kills itself just before its Nth SQL statement (the ``KillSwitch`` of ``writer.py``: a
test-only hook on the child's own engine, no setting selects it). The points are every
statement of the first batches and seeded picks after, so CI kills at the same points.
After every kill: no gc token committed; every live claim's snapshot and cited receipts
stored; every stored snapshot's blobs stored; no receipt without its run, no envelope or
in-process row without its receipt, no plan without its keys row; every kind's missing
rows equal the sum its tombstones record; SQLite's integrity check passes.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import random
import signal
from pathlib import Path

import pytest
from sqlalchemy import text

from probe_service.claims import claim_create
from probe_service.claims.receipts import store_receipts
from probe_service.errors import ProbeServiceError
from probe_service.retention import collect_garbage
from probe_service.snapshot.materialize import load_snapshot
from probe_service.store import Store, open_store

from ..claims.helpers import claim_request
from ..retention.farm import ONE_DAY, FarmRun, build_farm, later
from .writer import KillSwitch

pytestmark = [pytest.mark.slow, pytest.mark.crash]

_FORK = multiprocessing.get_context("fork")
#: Seeded kill points per backend.
KILLS = 12
#: Kinds whose removals the tombstones must account for exactly (the writer adds none).
_COUNTED = {"receipts": "receipts", "runs": "runs", "plans": "plans", "snapshots": "snapshots"}


def _gc_child(root: Path, url: str | None, kill_at: int) -> None:
    store = open_store(root, url)
    switch = KillSwitch(store, kill_at)
    switch.armed = True
    collect_garbage(store, ONE_DAY, holder="crash-test", now=later())
    (root / "gc-count").write_text(str(switch.count))
    os._exit(0)


def _writer_child(root: Path, url: str | None, farm: list[FarmRun], stop: Path) -> None:
    store = open_store(root, url)
    lookup = store_receipts(store)
    for i in range(10_000):
        if stop.exists():
            break
        run = farm[i % len(farm)]
        request = claim_request(
            run.snapshot_id, scope=f"w{os.getpid()}-{i}", evidence=[{"receipt": run.receipt_sha256}]
        )
        # gc removed what it cites first: a refusal, never a dangling claim.
        with contextlib.suppress(ProbeServiceError):
            claim_create(store, request, receipts=lookup)
    os._exit(0)


def _scalar(store: Store, sql: str) -> int:
    with store.reading() as conn:
        return int(conn.execute(text(sql)).scalar_one() or 0)


def _counts(store: Store) -> dict[str, int]:
    return {k: _scalar(store, f"SELECT count(*) FROM {t}") for k, t in _COUNTED.items()}  # noqa: S608


def _tombstoned(store: Store) -> dict[str, int]:
    sql = "SELECT coalesce(sum(removed), 0) FROM gc_tombstones WHERE kind = '{}'"
    return {k: _scalar(store, sql.format(k)) for k in _COUNTED}


def check_invariants(store: Store, before: dict[str, int], tomb_before: dict[str, int]) -> None:
    """Everything the crash test promises; fails naming the first one broken."""
    with store.reading() as conn:
        if conn.dialect.name == "sqlite":
            assert conn.execute(text("PRAGMA integrity_check")).scalar_one() == "ok"
        one = lambda sql: int(conn.execute(text(sql)).scalar_one())  # noqa: E731
        assert one("SELECT count(*) FROM gc_token") == 0, "a gc token committed"
        assert (
            one(
                "SELECT count(*) FROM claims c WHERE NOT EXISTS "
                "(SELECT 1 FROM snapshots s WHERE s.snapshot_id = c.snapshot_id)"
            )
            == 0
        ), "a claim whose snapshot is gone"
        assert (
            one(
                "SELECT count(*) FROM claim_evidence e WHERE e.receipt IS NOT NULL AND NOT EXISTS "
                "(SELECT 1 FROM receipts r WHERE r.receipt_sha256 = e.receipt)"
            )
            == 0
        ), "a claim whose cited receipt is gone"
        assert (
            one(
                "SELECT count(*) FROM receipts r WHERE NOT EXISTS "
                "(SELECT 1 FROM runs u WHERE u.run_id = r.run_id)"
            )
            == 0
        ), "a receipt without its run"
        for table in ("receipt_signatures", "inprocess_runs"):
            assert (
                one(
                    f"SELECT count(*) FROM {table} x WHERE NOT EXISTS "  # noqa: S608
                    "(SELECT 1 FROM receipts r WHERE r.run_id = x.run_id)"
                )
                == 0
            ), f"{table} without its receipt"
        assert (
            one(
                "SELECT count(*) FROM plans p WHERE NOT EXISTS "
                "(SELECT 1 FROM plan_keys k WHERE k.plan_id = p.plan_id)"
            )
            == 0
        ), "a plan without its keys row"
        assert (
            one(
                "SELECT count(*) FROM runs u WHERE u.receipt_sha256 IS NOT NULL AND NOT EXISTS "
                "(SELECT 1 FROM receipts r WHERE r.receipt_sha256 = u.receipt_sha256)"
            )
            == 0
        ), "a finished run names a receipt that is not stored"
        snapshot_ids = list(conn.execute(text("SELECT snapshot_id FROM snapshots")).scalars())
        digests = set(conn.execute(text("SELECT digest FROM blobs")).scalars())
    for snapshot_id in snapshot_ids:
        for entry in load_snapshot(store, snapshot_id).entries:
            assert entry.digest is None or entry.digest in digests, "a snapshot without its blob"
    now, tombs = _counts(store), _tombstoned(store)
    for kind in _COUNTED:
        removed = before[kind] - now[kind]
        assert removed == tombs[kind] - tomb_before[kind], f"{kind}: removals != tombstones"


def _attempt(root: Path, url: str | None, store: Store, tag: str, kill_at: int) -> int:
    farm = build_farm(store, root, 3, prefix=tag)
    before, tomb_before = _counts(store), _tombstoned(store)
    stop = root / f"stop-{tag}"
    writer = _FORK.Process(target=_writer_child, args=(root, url, farm, stop))
    writer.start()
    gc = _FORK.Process(target=_gc_child, args=(root, url, kill_at))
    gc.start()
    gc.join()
    stop.write_text("")
    writer.join()
    assert gc.exitcode is not None
    check_invariants(store, before, tomb_before)
    return gc.exitcode


def crash_gc(root: Path, url: str | None) -> int:
    """Kill gc at seeded points, checking after each; return the kills injected."""
    store = open_store(root, url)
    try:
        assert _attempt(root, url, store, "dry", kill_at=0) == 0
        statements = int((root / "gc-count").read_text())
        rng = random.Random("crash-gc")
        points = list(range(1, 7)) + [rng.randint(7, statements) for _ in range(KILLS - 6)]
        killed = 0
        for n, kill_at in enumerate(points):
            code = _attempt(root, url, store, f"k{n}", kill_at)
            assert code in (0, -signal.SIGKILL), f"gc exited {code}"
            killed += code == -signal.SIGKILL
        # After every kill the store takes a whole gc again.
        assert _attempt(root, url, store, "after", kill_at=0) == 0
    finally:
        store.close()
    return killed


def test_sqlite_gc_survives_sigkill(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """SQLite: every seeded kill of gc, with a writer running, keeps every promise."""
    killed = crash_gc(tmp_path, None)
    request.node.user_properties.append(("crash_points", killed))
    assert killed >= KILLS // 2


@pytest.mark.postgres
def test_postgres_gc_survives_sigkill(
    tmp_path: Path, pg_url: str, request: pytest.FixtureRequest
) -> None:
    """PostgreSQL: the same kills, the same promises."""
    killed = crash_gc(tmp_path, pg_url)
    request.node.user_properties.append(("crash_points", killed))
    assert killed >= KILLS // 2
