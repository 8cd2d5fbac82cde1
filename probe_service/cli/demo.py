"""``byte-probe demo``: run the main job on the embedded default."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .common import console
from .tables import print_table


def demo(
    workdir: Annotated[
        Path, typer.Option("--workdir", help="Where the demo keeps its store and policy file.")
    ] = Path(".demo"),
) -> None:
    """Run the main job on the shipped example repository and print the result.

    Example: byte-probe demo --workdir /tmp/demo
    """
    # The demo module is the package's own walkthrough script (its public entry point):
    # it drives the table itself, so this command hands it the console and the CLI's table
    # printer (plain off a terminal).
    from probe_service.demo import run_demo

    raise typer.Exit(run_demo(workdir, console, show_table=print_table))
