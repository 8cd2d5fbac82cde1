"""Run the Alembic migrations shipped in the package; both backends run the same ones.

Opening a store that is already at the newest revision must not cost the import of Alembic
(a CLI command that only reads the store starts well under a second): each migration file
is named after its revision and the history is linear, so the head is the greatest file
name, and the store's ``alembic_version`` row is compared with it before Alembic is loaded
(docs/ARCHITECTURE.md, "Storage and deployment").
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine, text
from sqlalchemy.exc import DBAPIError

from ..errors import StoreUnavailable

if TYPE_CHECKING:
    from alembic.config import Config

__all__ = ["current_revisions", "schema_head", "upgrade_to_head"]

_MIGRATIONS = Path(__file__).parent / "migrations"
#: Names the PostgreSQL lock that keeps two processes from migrating at once.
_MIGRATION_LOCK_KEY = 0x6279_7466


def _config() -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(_MIGRATIONS))
    return config


def schema_head() -> str:
    """The newest schema revision this engine ships (``capabilities`` reports it): the
    greatest migration file name (tests/store check it against Alembic's own head)."""
    return max(path.stem for path in (_MIGRATIONS / "versions").glob("[0-9]*.py"))


def current_revisions(engine: Engine) -> set[str]:
    """The revisions the store records, or none when it has no version table yet."""
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT version_num FROM alembic_version")).all()
    except DBAPIError:  # no table yet (or unreachable: the migration path then says so)
        return set()
    return {str(row[0]) for row in rows}


def upgrade_to_head(engine: Engine) -> None:
    """Bring the schema to the newest revision; a store already at head is untouched.

    Raises StoreUnavailable when this engine cannot migrate the store (is it newer?).
    """
    if current_revisions(engine) == {schema_head()}:
        return
    from alembic import command
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory
    from alembic.util import CommandError

    config = _config()
    heads = set(ScriptDirectory.from_config(config).get_heads())
    with engine.connect() as conn:
        if set(MigrationContext.configure(conn).get_current_heads()) == heads:
            return
    try:
        with engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATION_LOCK_KEY})
            config.attributes["connection"] = conn
            command.upgrade(config, "head")
    except CommandError as exc:
        raise StoreUnavailable(
            f"store schema cannot be migrated by this engine (is it newer?): {exc}"
        ) from exc
