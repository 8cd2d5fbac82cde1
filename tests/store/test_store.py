"""Migrations, transactions and the event cursor on both backends."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from sqlalchemy import inspect, text

from probe_service.errors import LimitExceeded, StoreUnavailable
from probe_service.store import Store, append_event, open_store, read_events


class TestMigrations:
    def test_schema_at_head(self, any_store: Store) -> None:
        """Opening a store creates the foundation tables through Alembic."""
        tables = set(inspect(any_store.engine).get_table_names())
        assert {"blobs", "snapshots", "stat_packs", "events", "alembic_version"} <= tables

    def test_reopen_is_idempotent(self, tmp_path: Path) -> None:
        """Opening the same embedded store twice keeps its data."""
        first = open_store(tmp_path)
        with first.transaction() as conn:
            append_event(conn, "k", "s", {})
        first.close()
        second = open_store(tmp_path)
        with second.reading() as conn:
            assert len(read_events(conn, 0, 10)) == 1

    def test_sqlite_runs_in_wal_mode(self, sqlite_store: Store) -> None:
        """The embedded store journals in WAL mode with foreign keys on."""
        with sqlite_store.reading() as conn:
            assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
            assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1

    def test_unreachable_database_is_store_unavailable(self, tmp_path: Path) -> None:
        """A PostgreSQL URL nobody answers raises StoreUnavailable, not a driver error."""
        url = "postgresql+psycopg://postgres@127.0.0.1:1/none?connect_timeout=2"
        with pytest.raises(StoreUnavailable, match="unavailable"):
            open_store(tmp_path, url)


class TestEvents:
    def test_cursor_is_dense_in_append_order(self, any_store: Store) -> None:
        """Events appended in one transaction read back numbered 1, 2, 3 … in that order."""
        with any_store.transaction() as conn:
            for i in range(5):
                append_event(conn, "k", f"s{i}", {"i": i})
        with any_store.reading() as conn:
            page = read_events(conn, 0, 10)
        assert [(e.cursor, e.subject) for e in page] == [(i + 1, f"s{i}") for i in range(5)]

    def test_after_and_limit(self, any_store: Store) -> None:
        """Reading after a cursor returns only later events, at most ``limit``."""
        with any_store.transaction() as conn:
            for i in range(5):
                append_event(conn, "k", f"s{i}", {})
        with any_store.reading() as conn:
            cursors = [e.cursor for e in read_events(conn, 0, 10)]
            page = read_events(conn, cursors[1], 2)
        assert [e.cursor for e in page] == cursors[2:4]

    def test_limit_out_of_range_refused(self, sqlite_store: Store) -> None:
        """A zero or huge page size is refused naming the limit."""
        with sqlite_store.reading() as conn, pytest.raises(LimitExceeded, match="limit"):
            read_events(conn, 0, 0)

    def test_rolled_back_event_is_never_seen(self, any_store: Store) -> None:
        """An event written in a failed transaction never appears."""

        def write_then_fail() -> None:
            with any_store.transaction() as conn:
                append_event(conn, "k", "lost", {})
                raise RuntimeError("abort")

        with pytest.raises(RuntimeError):
            write_then_fail()
        with any_store.reading() as conn:
            assert read_events(conn, 0, 10) == []

    def test_concurrent_writers_never_skip_a_cursor(self, pg_store: Store) -> None:
        """A reader following the cursor sees every event once, even with racing writers."""
        seen: list[int] = []
        done = threading.Event()

        def write(n: int) -> None:
            for i in range(20):
                with pg_store.transaction() as conn:
                    append_event(conn, "k", f"w{n}-{i}", {})

        writers = [threading.Thread(target=write, args=(n,)) for n in range(4)]
        for w in writers:
            w.start()

        def follow() -> None:
            cursor = 0
            while True:
                finished = done.is_set()
                with pg_store.reading() as conn:
                    page = read_events(conn, cursor, 1000)
                seen.extend(e.cursor for e in page)
                cursor = page[-1].cursor if page else cursor
                if finished and not page:
                    return

        reader = threading.Thread(target=follow)
        reader.start()
        for w in writers:
            w.join()
        done.set()
        reader.join()
        assert len(seen) == 80
        assert seen == sorted(set(seen))
