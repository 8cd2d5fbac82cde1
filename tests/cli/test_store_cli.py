"""`byte-probe store migrate`: the one-shot step a deployment runs before its workers."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from sqlalchemy import create_engine, inspect

from probe_service.cli import store as store_cli
from probe_service.store import DATABASE_URL_ENV


class TestStoreMigrate:
    def test_migrates_an_empty_postgres_schema(
        self, pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Run against an empty schema, the command leaves the runs table and a version row."""
        monkeypatch.setenv(DATABASE_URL_ENV, pg_url)
        command = typer.main.get_command(store_cli.app)
        command.main(["migrate", "--root", str(tmp_path)], standalone_mode=False)
        engine = create_engine(pg_url)
        tables = set(inspect(engine).get_table_names())
        engine.dispose()
        assert {"alembic_version", "runs", "receipts"} <= tables

    def test_is_documented_with_an_example(self) -> None:
        """The command's help carries an Example: line, like every CLI command."""
        assert "Example:" in (store_cli.migrate.__doc__ or "")
