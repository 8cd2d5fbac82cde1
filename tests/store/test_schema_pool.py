"""The test suite's pool of migrated PostgreSQL schemas hands out only schemas as new as a
freshly built one: a test that reuses one must not see what an earlier test wrote or changed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from probe_service.snapshot import snapshot_capture
from probe_service.store import open_store

from ..conftest import MigratedSchemaPool, _schema_of

pytestmark = pytest.mark.postgres


@pytest.fixture
def pool(postgres_base_url: str, migrated_pg_script: str | None) -> Iterator[MigratedSchemaPool]:
    if migrated_pg_script is None:
        pytest.fail("pg_dump is needed to build the pool's schemas (postgresql-client)")
    own = MigratedSchemaPool(postgres_base_url, migrated_pg_script)
    yield own
    own.close()


def _rows(url: str) -> dict[str, int]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            tables = conn.execute(
                text("SELECT tablename FROM pg_tables WHERE schemaname = :s"),
                {"s": _schema_of(url)},
            ).scalars()
            count = 'SELECT count(*) FROM "{}"'  # names from the catalog
            return {t: conn.execute(text(count.format(t))).scalar_one() for t in tables}
    finally:
        engine.dispose()


def test_a_reused_schema_holds_only_the_migrations_rows(
    pool: MigratedSchemaPool, repo: Path, tmp_path: Path
) -> None:
    url = pool.take(tmp_path / "a")
    fresh = _rows(url)
    store = open_store(tmp_path / "a", url)
    snapshot_capture(store, repo)
    store.close()
    assert _rows(url) != fresh  # the test wrote something
    pool.give_back(url)
    again = pool.take(tmp_path / "b")
    assert again == url  # reused, not rebuilt
    assert _rows(again) == fresh
    store = open_store(tmp_path / "b", again)  # at head: the version row survived the reset
    assert snapshot_capture(store, repo).snapshot_id
    store.close()


def test_sequences_start_again(pool: MigratedSchemaPool, tmp_path: Path) -> None:
    url = pool.take(tmp_path)
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            first = conn.execute(text("SELECT nextval('event_outbox_id_seq')")).scalar_one()
            conn.execute(text("SELECT nextval('event_outbox_id_seq')"))
        pool.give_back(url)
        assert pool.take(tmp_path) == url
        with engine.begin() as conn:
            assert conn.execute(text("SELECT nextval('event_outbox_id_seq')")).scalar_one() == first
    finally:
        engine.dispose()


def test_a_schema_whose_definition_changed_is_not_handed_out(
    pool: MigratedSchemaPool, tmp_path: Path
) -> None:
    url = pool.take(tmp_path)
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text("ALTER TABLE claim_audit DISABLE TRIGGER claim_audit_no_truncate"))
    finally:
        engine.dispose()
    pool.give_back(url)
    assert pool.take(tmp_path) != url


def test_a_schema_a_test_left_locked_is_not_handed_out(
    pool: MigratedSchemaPool, tmp_path: Path
) -> None:
    url = pool.take(tmp_path)
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            conn.execute(text("LOCK TABLE claim_audit IN ACCESS EXCLUSIVE MODE"))
            pool.give_back(url)  # gives up after its lock timeout instead of waiting
            assert pool.take(tmp_path) != url
            conn.rollback()
    finally:
        engine.dispose()
