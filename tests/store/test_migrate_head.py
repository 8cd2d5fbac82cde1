"""Opening a store already at the newest schema skips Alembic (a quick CLI start)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, text

from probe_service.store import DB_FILENAME, open_store
from probe_service.store.migrate import _MIGRATIONS, current_revisions, schema_head
from probe_service.store.safety import prepare_state_dir

_PROBE = """
import json, sys
from pathlib import Path
from probe_service.store import open_store
open_store(Path(sys.argv[1])).close()
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "alembic")))
"""


def _alembic_loaded(root: Path) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(root)], capture_output=True, text=True, check=True
    )
    loaded: list[str] = json.loads(done.stdout)
    return loaded


def test_head_from_file_names_is_alembics_head() -> None:
    """The cheap head (greatest migration file name) is the one Alembic computes."""
    config = Config()
    config.set_main_option("script_location", str(_MIGRATIONS))
    assert ScriptDirectory.from_config(config).get_heads() == [schema_head()]


def test_current_store_opens_without_alembic(tmp_path: Path) -> None:
    """A store at head is opened without importing Alembic; a new one needs it."""
    assert _alembic_loaded(tmp_path) != []  # created and migrated
    assert _alembic_loaded(tmp_path) == []  # already at head


def test_store_behind_head_is_migrated(tmp_path: Path) -> None:
    """A store whose version row is older than head is still migrated to head."""
    db = prepare_state_dir(tmp_path) / DB_FILENAME
    engine = create_engine(f"sqlite+pysqlite:///{db}")
    config = Config()
    config.set_main_option("script_location", str(_MIGRATIONS))
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "0005_trust")
    assert current_revisions(engine) == {"0005_trust"}
    open_store(tmp_path).close()
    assert current_revisions(engine) == {schema_head()}
    with engine.connect() as conn:
        conn.execute(text("SELECT count(*) FROM receipt_signatures")).scalar_one()
    engine.dispose()
