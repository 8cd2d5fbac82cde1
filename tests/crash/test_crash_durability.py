"""SIGKILL a writer at seeded statements; the store stays whole (docs/ARCHITECTURE.md, store).

For each operation a forked child runs it and kills itself just before its Nth SQL
statement: every N once for an operation of at most 15 statements (a queue run: inside
its take, between take and finish, inside its finish), the rest drawn from
``random.Random`` seeded by the operation, so CI kills at the same points every run.
After every kill the janitor passes and the checks run: SQLite's ``PRAGMA
integrity_check``; no receipt without its run and its one event; no claim without its
dependencies; no snapshot without its blobs; event cursors 1, 2, 3 … with no hole; no run
left ``running`` (a run killed between its take and its finish is queued again: nothing
lost, nothing twice).
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
from pathlib import Path

import pytest
from sqlalchemy import func, select, text

from probe_service.claims.tables import claim_dependencies, claims
from probe_service.plans.tables import receipts
from probe_service.queue.execute import WorkerContext, reap_runs
from probe_service.queue.tables import runs
from probe_service.snapshot.materialize import load_snapshot
from probe_service.store import Store, open_store, read_events
from probe_service.store.schema import blobs, events, snapshots

from .writer import OPERATIONS, run_operation

pytestmark = [pytest.mark.slow, pytest.mark.crash]

#: Seeded kill points per operation and backend.
KILLS_PER_OPERATION = 15
_FORK = multiprocessing.get_context("fork")


def _child(root: Path, url: str | None, operation: str, tag: str, kill_at: int) -> None:
    count = run_operation(root, url, operation, tag, kill_at)
    (root / f"count-{tag}").write_text(str(count))
    os._exit(0)


def _run(root: Path, url: str | None, operation: str, tag: str, kill_at: int) -> int:
    """Run one child; return its exit code (``-SIGKILL`` when the kill point was reached)."""
    process = _FORK.Process(target=_child, args=(root, url, operation, tag, kill_at))
    process.start()
    process.join()
    assert process.exitcode is not None
    return process.exitcode


def check_invariants(store: Store) -> None:
    """Every constraint the crash test promises; fails naming the first one broken."""
    reap_runs(WorkerContext(store=store, lease_ms=1), lambda ids: len(ids))
    with store.reading() as conn:
        if conn.dialect.name == "sqlite":
            assert conn.execute(text("PRAGMA integrity_check")).scalar_one() == "ok"
        run_ids = set(conn.execute(select(runs.c.run_id)).scalars())
        receipt_runs = set(conn.execute(select(receipts.c.run_id)).scalars())
        assert receipt_runs <= run_ids, "a receipt without its run"
        done = conn.execute(
            select(runs.c.receipt_sha256).where(
                runs.c.state == "done", runs.c.receipt_sha256.is_not(None)
            )
        ).scalars()
        stored = set(conn.execute(select(receipts.c.receipt_sha256)).scalars())
        assert set(done) <= stored, "a finished run names a receipt that is not stored"
        running = conn.execute(select(func.count()).where(runs.c.state == "running")).scalar()
        assert running == 0, "a run left running after the janitor passed"
        claim_ids = set(conn.execute(select(claims.c.claim_id)).scalars())
        with_deps = set(conn.execute(select(claim_dependencies.c.claim_id)).scalars())
        assert claim_ids <= with_deps, "a claim without its dependencies"
        assert with_deps <= claim_ids, "dependencies without their claim"
        cursors: list[int] = []
        while page := read_events(conn, cursors[-1] if cursors else 0, 500):
            cursors.extend(e.cursor for e in page)
        assert cursors == sorted(set(cursors)), "event cursors not strictly increasing"
        total = conn.execute(select(func.count()).select_from(events)).scalar_one()
        assert len(cursors) == total, "an event the cursor walk skipped"
        assert cursors == list(range(1, total + 1)), "a hole in the event cursor"
        probe_runs = [
            e.payload["run_id"] for e in read_events(conn, 0, 10_000) if e.kind == "probe"
        ]
        assert sorted(probe_runs) == sorted(receipt_runs), "a receipt without its one event"
        states = set(conn.execute(select(runs.c.state)).scalars())
        assert states <= {"queued", "done"}, "a run neither queued again nor done"

        snapshot_ids = list(conn.execute(select(snapshots.c.snapshot_id)).scalars())
        digests = set(conn.execute(select(blobs.c.digest)).scalars())
    for snapshot_id in snapshot_ids:
        for entry in load_snapshot(store, snapshot_id).entries:
            assert entry.digest is None or entry.digest in digests, "a snapshot without its blob"


def crash_many(root: Path, url: str | None, operation: str) -> int:
    """Kill ``operation`` at seeded points, checking after each; return kills injected."""
    dry = _run(root, url, operation, f"{operation}-dry", kill_at=0)
    assert dry == 0
    statements = int((root / f"count-{operation}-dry").read_text())
    assert statements > 0
    rng = random.Random(f"crash-{operation}")
    # Every statement once when there are few (for a run: inside the take, between the
    # take and the finish, inside the finish), seeded picks for the rest.
    points = list(range(1, min(statements, KILLS_PER_OPERATION) + 1))
    points += [rng.randint(1, statements) for _ in range(KILLS_PER_OPERATION - len(points))]
    killed = 0
    store = open_store(root, url)
    try:
        for attempt, kill_at in enumerate(points):
            code = _run(root, url, operation, f"{operation}-{attempt}", kill_at)
            assert code == -signal.SIGKILL, f"{operation}: kill point {kill_at} not reached"
            killed += 1
            check_invariants(store)
        # The store still takes the same write after all the kills.
        assert _run(root, url, operation, f"{operation}-after", kill_at=0) == 0
        check_invariants(store)
    finally:
        store.close()
    return killed


@pytest.mark.parametrize("operation", OPERATIONS)
def test_sqlite_survives_sigkill(
    tmp_path: Path, operation: str, request: pytest.FixtureRequest
) -> None:
    """SQLite (WAL): every seeded kill leaves an intact store holding every constraint."""
    killed = crash_many(tmp_path, None, operation)
    request.node.user_properties.append(("crash_points", killed))
    assert killed == KILLS_PER_OPERATION


@pytest.mark.postgres
@pytest.mark.parametrize("operation", OPERATIONS)
def test_postgres_survives_sigkill(
    tmp_path: Path, pg_url: str, operation: str, request: pytest.FixtureRequest
) -> None:
    """PostgreSQL (fresh schema): the same kills, the same constraints."""
    killed = crash_many(tmp_path, pg_url, operation)
    request.node.user_properties.append(("crash_points", killed))
    assert killed == KILLS_PER_OPERATION
