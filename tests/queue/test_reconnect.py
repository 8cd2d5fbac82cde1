"""A worker whose PostgreSQL connection is killed mid-run reconnects and retries
(docs/ARCHITECTURE.md, "Lean store path": no pre-ping on the hot path).

The server backends of the worker's own connections are terminated from another
connection (``pg_terminate_backend``) while the probe runs, or inside the finishing
transaction; the run still ends with one receipt, one event and its run done.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, event, func, select, text

from probe_service.plans import parse_plan
from probe_service.plans.persist import load_receipt, save_receipt
from probe_service.plans.tables import receipts
from probe_service.queue import InlineQueue, WorkerContext, execute_run, submit_plans
from probe_service.queue.runs import finish_run_in
from probe_service.queue.tables import runs
from probe_service.settings import read_settings
from probe_service.store import Store, read_events

from ..stubsandbox import Canned, StubSandbox
from .conftest import POLICY_ID, shell_plan

pytestmark = pytest.mark.postgres


@pytest.fixture
def admin(pg_url: str) -> Iterator[Engine]:
    """Another connection to the same server, to terminate the worker's backends."""
    engine = create_engine(pg_url)
    yield engine
    engine.dispose()


class Backends:
    """The server process ids of every connection ``store``'s pool opened."""

    def __init__(self, store: Store) -> None:
        self.pids: set[int] = set()
        self.opened = 0
        event.listen(store.engine, "connect", self._connected)
        store.engine.dispose()  # every connection from now on is one this sees open

    def _connected(self, dbapi_conn: Any, _record: Any) -> None:
        self.pids.add(int(dbapi_conn.info.backend_pid))
        self.opened += 1

    def terminate(self, admin: Engine) -> int:
        """Terminate them all from ``admin``; return how many the server ended."""
        with admin.begin() as conn:
            ended = sum(
                bool(conn.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid}).scalar())
                for pid in sorted(self.pids)
            )
            # pg_terminate_backend only signals: wait until each backend is gone.
            for pid in sorted(self.pids):
                conn.execute(
                    text(
                        "SELECT pg_terminate_backend(:p, 30000) WHERE EXISTS "
                        "(SELECT 1 FROM pg_stat_activity WHERE pid = :p)"
                    ),
                    {"p": pid},
                )
        self.pids.clear()
        return ended


def _submit(store: Store, snapshot_id: str, name: str) -> str:
    plan = parse_plan(shell_plan(snapshot_id, "exit 0", name))
    return submit_plans(store, InlineQueue(read_settings()), [plan], POLICY_ID).run_ids[0]


def _written_once(store: Store, run_id: str) -> None:
    """The run is done with exactly one receipt and exactly one probe event."""
    with store.reading() as conn:
        state = conn.execute(select(runs.c.state).where(runs.c.run_id == run_id)).scalar_one()
        count = conn.execute(
            select(func.count()).select_from(receipts).where(receipts.c.run_id == run_id)
        ).scalar_one()
        probes = [e for e in read_events(conn, 0, 1000) if e.payload.get("run_id") == run_id]
    assert (state, count, len(probes)) == ("done", 1, 1)


def _killing(backends: Backends, admin: Engine) -> Callable[[Any], Canned]:
    """A stub answer that terminates the worker's backends while the probe 'runs'."""

    def answer(_plan: Any) -> Canned:
        assert backends.terminate(admin) >= 1
        return Canned()

    return answer


def test_backend_killed_while_the_probe_runs(
    shared_store: Store, snapshot_id: str, policy_file: object, admin: Engine
) -> None:
    """Between taking the run and finishing it the server ends the worker's connection:
    the finish reconnects, and the run is written once."""
    run_id = _submit(shared_store, snapshot_id, "killed idle")
    backends = Backends(shared_store)
    backend = StubSandbox(_killing(backends, admin))
    opened_before = backends.opened
    assert execute_run(WorkerContext(store=shared_store, backend=backend), run_id) == "supports"
    assert backends.opened > opened_before  # a fresh connection finished the run
    _written_once(shared_store, run_id)


def test_backend_killed_inside_the_finishing_transaction(
    shared_store: Store, snapshot_id: str, policy_file: object, admin: Engine
) -> None:
    """The connection dies after the finishing transaction began (its receipt insert
    fails): the whole transaction runs again on a new connection, writing once."""
    run_id = _submit(shared_store, snapshot_id, "killed in finish")
    backends = Backends(shared_store)
    attempts: list[str] = []

    def before(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.startswith("INSERT INTO receipts"):
            attempts.append(statement)
            if len(attempts) == 1:
                assert backends.terminate(admin) >= 1

    event.listen(shared_store.engine, "before_cursor_execute", before)
    ctx = WorkerContext(store=shared_store, backend=StubSandbox())
    assert execute_run(ctx, run_id) == "supports"
    event.remove(shared_store.engine, "before_cursor_execute", before)
    assert len(attempts) == 2  # the first died with its connection, the retry wrote
    _written_once(shared_store, run_id)


def test_backend_killed_at_commit(
    shared_store: Store, snapshot_id: str, policy_file: object, admin: Engine
) -> None:
    """The connection dies as the finishing transaction commits: nothing of it landed,
    and the retry writes it whole."""
    run_id = _submit(shared_store, snapshot_id, "killed at commit")
    backends = Backends(shared_store)
    receipt_inserts: list[int] = []
    killed: list[int] = []

    def before(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.startswith("INSERT INTO receipts"):
            receipt_inserts.append(1)

    def at_commit(_conn: Any) -> None:
        # The first commit after the receipt's insert is the finishing transaction's.
        if receipt_inserts and not killed:
            killed.append(1)
            assert backends.terminate(admin) >= 1

    event.listen(shared_store.engine, "before_cursor_execute", before)
    event.listen(shared_store.engine, "commit", at_commit)
    ctx = WorkerContext(store=shared_store, backend=StubSandbox())
    assert execute_run(ctx, run_id) == "supports"
    event.remove(shared_store.engine, "commit", at_commit)
    event.remove(shared_store.engine, "before_cursor_execute", before)
    assert (len(killed), len(receipt_inserts)) == (1, 2)  # killed at commit, written again
    _written_once(shared_store, run_id)


def test_finish_retried_after_a_commit_that_landed(
    shared_store: Store, snapshot_id: str, policy_file: object
) -> None:
    """A retry of the finishing transaction after its commit landed (the answer lost)
    writes nothing: no second receipt, no second event."""
    run_id = _submit(shared_store, snapshot_id, "lost answer")
    ctx = WorkerContext(store=shared_store, backend=StubSandbox())
    assert execute_run(ctx, run_id) == "supports"
    receipt = load_receipt(shared_store, run_id)

    def finish(conn: Any) -> None:
        finish_run_in(
            conn,
            run_id,
            outcome=receipt.committed.outcome,
            reason=receipt.committed.reason,
            receipt_sha256=receipt.receipt_sha256,
            action_key=receipt.committed.action_key,
        )

    assert save_receipt(shared_store, run_id, receipt, True, None, finish) is False
    _written_once(shared_store, run_id)
