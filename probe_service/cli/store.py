"""``byte-probe store``: operations on the store itself (migrations for deployments)."""

from __future__ import annotations

from pathlib import Path

import typer

from .common import RootOption, console, local_session

app = typer.Typer(no_args_is_help=True)


@app.callback()
def store() -> None:
    """The store itself: migrations."""


@app.command("migrate")
def migrate(root: RootOption = Path(".")) -> None:
    """Bring the store named by PROBE_DATABASE_URL (else the embedded one) to the newest schema.

    Opening the store runs the migrations; a one-shot deployment step runs this before workers.

    Example: PROBE_DATABASE_URL=postgresql+psycopg://probe@db/probe byte-probe store migrate
    """
    with local_session(root) as svc:
        dialect = svc.store.dialect_name  # opening the store is what migrates it
    console.print(f"store migrated ({dialect})")
