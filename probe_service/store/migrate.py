"""Run the Alembic migrations shipped in the package; both backends run the same ones."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, text

__all__ = ["schema_head", "upgrade_to_head"]

_MIGRATIONS = Path(__file__).parent / "migrations"
#: Names the PostgreSQL lock that keeps two processes from migrating at once.
_MIGRATION_LOCK_KEY = 0x6279_7466


def _config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(_MIGRATIONS))
    return config


def schema_head() -> str:
    """The newest schema revision this engine ships (``capabilities`` reports it)."""
    return ",".join(sorted(ScriptDirectory.from_config(_config()).get_heads()))


def upgrade_to_head(engine: Engine) -> None:
    """Bring the schema to the newest revision; a store already at head is untouched."""
    config = _config()
    heads = set(ScriptDirectory.from_config(config).get_heads())
    with engine.connect() as conn:
        if set(MigrationContext.configure(conn).get_current_heads()) == heads:
            return
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATION_LOCK_KEY})
        config.attributes["connection"] = conn
        command.upgrade(config, "head")
