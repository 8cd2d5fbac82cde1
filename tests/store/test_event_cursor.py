"""The event cursor under concurrent writers (docs/ARCHITECTURE.md, "Event cursor").

Sixteen writer threads each hold a transaction with events in it; the test releases them
one at a time, in a seeded random order, each to commit or roll back, and three
consumers read after every release. Threading events force every interleaving the test
names (no sleeps): on PostgreSQL all sixteen transactions are open at once, and the one
holding the smallest outbox id is always released last, so "a smaller number commits
later" happens in every round. Every consumer must see each committed event exactly once,
in cursor order, and the cursors must be 1, 2, 3 … with no hole a rollback left.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field

import pytest
from sqlalchemy import Connection, select, text

from probe_service.store import Store, append_events, read_events
from probe_service.store.consumers import acknowledge, consumer_cursor
from probe_service.store.schema import event_outbox, events

WRITERS = 16
ROUNDS = 3
#: Every wait is bounded so a broken build fails instead of hanging; never reached when
#: the code is right (the waits are on events the other side always sets).
WAIT_S = 60


class Rollback(Exception):
    """Raised inside a writer's transaction to roll it back."""


@dataclass
class Writer:
    """One writer thread's transaction in one round, and the events it is driven by."""

    number: int
    events: int
    commit: bool
    inserted: threading.Event = field(default_factory=threading.Event)
    go: threading.Event = field(default_factory=threading.Event)
    finished: threading.Event = field(default_factory=threading.Event)
    first_outbox_id: int = 0
    failure: BaseException | None = None


@dataclass
class Consumer:
    """A reader following the cursor with its own page size; ``named`` ones acknowledge."""

    page: int
    named: str | None = None
    cursor: int = 0
    seen: list[tuple[int, str]] = field(default_factory=list)

    def read(self, store: Store) -> None:
        """Read every page available now, as ``knowledge_events`` serves it."""
        while True:
            if self.named is None:
                with store.reading() as conn:
                    page = read_events(conn, self.cursor, self.page)
            else:
                with store.transaction() as conn:
                    if self.cursor:
                        acknowledge(conn, self.named, self.cursor)
                    page = read_events(conn, consumer_cursor(conn, self.named), self.page)
            if not page:
                return
            self.seen.extend((e.cursor, e.subject) for e in page)
            self.cursor = page[-1].cursor


def _own_first_outbox_id(conn: Connection, subject: str) -> int:
    """The number this transaction's first event took when written: its outbox id (0 on
    SQLite, which numbers at commit)."""
    if conn.dialect.name != "postgresql":
        return 0
    found = conn.execute(
        select(event_outbox.c.id).where(event_outbox.c.subject == subject)
    ).scalar()
    if found is None:  # numbered in ``events`` at write: the design this test must catch
        found = conn.execute(select(events.c.cursor).where(events.c.subject == subject)).scalar()
    return int(found or 0)


def _write(store: Store, writer: Writer, round_no: int, hold_open: bool) -> None:
    """The writer's transaction: append, say so, wait for its turn, commit or roll back."""
    subjects = [f"r{round_no}-w{writer.number}-e{i}" for i in range(writer.events)]
    try:
        if not hold_open:  # SQLite takes its write lock at BEGIN: wait for the turn first
            assert writer.go.wait(WAIT_S)
        with store.transaction() as conn:
            append_events(conn, [("test", subject, {}) for subject in subjects])
            writer.first_outbox_id = _own_first_outbox_id(conn, subjects[0])
            writer.inserted.set()
            if hold_open:
                assert writer.go.wait(WAIT_S)
            if not writer.commit:
                raise Rollback
    except Rollback:
        pass
    except BaseException as exc:  # reported by the coordinator, never lost in the thread
        writer.failure = exc
        writer.inserted.set()
    finally:
        writer.finished.set()


def _round(
    store: Store, rng: random.Random, round_no: int, consumers: list[Consumer], hold_open: bool
) -> list[str]:
    """Run one round; return the subjects committed, in the order they were written."""
    writers = [
        Writer(n, events=rng.randint(1, 3), commit=rng.random() > 0.3) for n in range(WRITERS)
    ]
    writers[0].commit = True  # at least one commit per round
    threads = [
        threading.Thread(target=_write, args=(store, w, round_no, hold_open)) for w in writers
    ]
    for thread in threads:
        thread.start()
    order = list(writers)
    rng.shuffle(order)
    if hold_open:
        for writer in writers:
            assert writer.inserted.wait(WAIT_S)
        # All sixteen are open: the smallest outbox id commits last, after consumers
        # have read events numbered after it.
        smallest = min(writers, key=lambda w: w.first_outbox_id)
        smallest.commit = True
        order.remove(smallest)
        order.append(smallest)
        order[0].commit = True  # a larger number is committed and read before it
    committed: list[str] = []
    for writer in order:
        writer.go.set()
        assert writer.finished.wait(WAIT_S)
        assert writer.failure is None, writer.failure
        if writer.commit:
            committed.extend(f"r{round_no}-w{writer.number}-e{i}" for i in range(writer.events))
        for consumer in consumers:
            consumer.read(store)
    for thread in threads:
        thread.join(WAIT_S)
    return committed


def _run(store: Store, *, hold_open: bool, seed: str) -> None:
    rng = random.Random(seed)
    consumers = [Consumer(page=1), Consumer(page=2), Consumer(page=1000, named="follower")]
    committed: list[str] = []
    for round_no in range(ROUNDS):
        committed.extend(_round(store, rng, round_no, consumers, hold_open))
    for consumer in consumers:
        cursors = [cursor for cursor, _ in consumer.seen]
        subjects = [subject for _, subject in consumer.seen]
        assert cursors == list(range(1, len(committed) + 1)), "a hole or a repeat"
        assert sorted(subjects) == sorted(committed), "an event missed or seen twice"
        # In release order: on PostgreSQL each round's smallest outbox id comes last.
        assert subjects == committed, "not in the order the commits became visible"
    if hold_open:
        with store.reading() as conn:
            left = conn.execute(text("SELECT count(*) FROM event_outbox")).scalar_one()
        assert left == 0, "an event left unnumbered in the outbox"


@pytest.mark.postgres
def test_sixteen_open_writers_commit_in_random_order(pg_store: Store) -> None:
    """PostgreSQL: with sixteen transactions open at once, released in random order with
    random rollbacks, every consumer sees each committed event once, densely numbered, the
    smallest outbox id (committed last) included."""
    _run(pg_store, hold_open=True, seed="cursor-pg")


def test_sixteen_writers_one_at_a_time_on_sqlite(sqlite_store: Store) -> None:
    """SQLite (one writer at a time): the same random order and rollbacks, the same
    reader contract."""
    _run(sqlite_store, hold_open=False, seed="cursor-sqlite")
