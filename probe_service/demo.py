"""``byte-probe demo``: the main job on the embedded default, start to finish."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from . import service
from .store import open_store

__all__ = ["EXAMPLE_REPO", "run_demo"]

#: The example repository shipped beside the package.
EXAMPLE_REPO = Path(__file__).resolve().parent.parent / "examples" / "tinyparse"


def run_demo(workdir: Path, console: Console) -> int:
    """Capture the example repository into an embedded store under ``workdir``; return 0."""
    workdir.mkdir(parents=True, exist_ok=True)
    store = open_store(workdir)
    try:
        result = service.snapshot_capture(store, EXAMPLE_REPO)
        table = Table(title=f"snapshot of {EXAMPLE_REPO.name}", show_header=False)
        for key, value in result.model_dump().items():
            table.add_row(key, str(value))
        console.print(table)
    finally:
        store.close()
    return 0
