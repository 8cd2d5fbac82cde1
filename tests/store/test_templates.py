"""The stores the fixtures hand out are copies of one migrated store per session
(tests/conftest.py); these tests prove a copy is exactly what the migrations build."""

from __future__ import annotations

import tempfile
from pathlib import Path

from sqlalchemy import text

from probe_service.store import Store, open_store

from ..conftest import fresh_schema

#: The catalog of one schema: every column, index, constraint, trigger and function, and
#: the recorded revision, with the schema's own name taken out.
_CATALOG = [
    "SELECT table_name, column_name, data_type, is_nullable, column_default "
    "FROM information_schema.columns WHERE table_schema = :s",
    "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = :s",
    "SELECT conname, pg_get_constraintdef(c.oid) FROM pg_constraint c "
    "JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname = :s",
    "SELECT tgname, pg_get_triggerdef(t.oid) FROM pg_trigger t JOIN pg_class r "
    "ON r.oid = t.tgrelid JOIN pg_namespace n ON n.oid = r.relnamespace "
    "WHERE n.nspname = :s AND NOT t.tgisinternal",
    "SELECT p.proname, pg_get_functiondef(p.oid) FROM pg_proc p "
    "JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = :s",
    "SELECT version_num FROM alembic_version",
]


def _catalog(store: Store) -> list[list[tuple[str, ...]]]:
    with store.reading() as conn:
        schema = conn.execute(text("SELECT current_schema()")).scalar_one()
        found = []
        for query in _CATALOG:
            rows = conn.execute(text(query), {"s": schema}).all()
            found.append(sorted(tuple(str(v).replace(schema, "S") for v in row) for row in rows))
    return found


def test_a_postgresql_copy_equals_a_migrated_schema(
    pg_store: Store, postgres_base_url: str
) -> None:
    # A second, empty schema, migrated the ordinary way.
    with fresh_schema(postgres_base_url) as url, tempfile.TemporaryDirectory() as tmp:
        migrated = open_store(Path(tmp), url)
        try:
            expected = _catalog(migrated)
        finally:
            migrated.close()
    assert all(expected)  # every query found something: the comparison compares
    assert _catalog(pg_store) == expected


def test_a_sqlite_copy_equals_a_migrated_store(sqlite_store: Store, tmp_path: Path) -> None:
    query = "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"
    root = tmp_path / "elsewhere"
    root.mkdir()
    fresh = open_store(root)
    try:
        with fresh.reading() as conn:
            expected = conn.execute(text(query)).all()
    finally:
        fresh.close()
    with sqlite_store.reading() as conn:
        assert conn.execute(text(query)).all() == expected
        assert conn.execute(text("SELECT version_num FROM alembic_version")).all()
