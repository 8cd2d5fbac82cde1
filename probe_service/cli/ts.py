"""``byte-probe ts …``: the TypeScript boundary of a symbol in a stored snapshot."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from probe_service.safe_text import untrusted
from probe_service.service.adapters import BoundaryResult

from .common import JsonOption, RootOption, console, emit_json, session
from .tables import print_table

app = typer.Typer(help="TypeScript compiler boundaries of stored snapshots.")

#: Exit code of an answer that is not a closed boundary (incomplete or unavailable).
EXIT_NOT_CLOSED = 1


@app.command("boundary")
def boundary(
    snapshot: Annotated[str, typer.Option("--snapshot", help="Snapshot id (or unique prefix).")],
    symbol: Annotated[str, typer.Option("--symbol", help="The TypeScript symbol's name.")],
    file: Annotated[
        str | None, typer.Option("--file", help="The snapshot file that declares it.")
    ] = None,
    root: RootOption = Path("."),
    json_out: JsonOption = False,
) -> int:
    """Definitions, consumers and implementations of a symbol, from the sandboxed
    compiler worker.

    Exit codes: 0 a complete (or language-inapplicable) boundary; 1 incomplete or
    unavailable (the unknowns say why); 3 no declaration of the symbol (not_found, naming
    the files searched) or another input error.

    Example: byte-probe ts boundary --snapshot 3f2a… --symbol chargeCard --json
    """
    with session(root) as svc:
        result: BoundaryResult = svc.typescript_boundary(
            snapshot_id=snapshot, symbol=symbol, declared_in=file
        )
    if json_out:
        emit_json(result)
    else:
        _print(result)
    return 0 if result.status in ("complete", "inapplicable") else EXIT_NOT_CLOSED


def _print(result: BoundaryResult) -> None:
    # Paths, names and unknowns come from the repository: data, never markup.
    console.print(untrusted(f"boundary of {result.symbol}: {result.status}"))
    table = Table(show_header=True)
    for column in ("role", "path", "line", "bytes", "span sha256"):
        table.add_column(column)
    for site in (*result.definitions, *result.consumers, *result.implementations):
        table.add_row(
            site.role,
            untrusted(site.path),
            str(site.line),
            f"{site.start}-{site.end}",
            site.sha256[:16],
        )
    print_table(console, table)
    if result.identifiers:
        console.print(untrusted(f"identifier query set: {', '.join(result.identifiers)}"))
    for unknown in result.unknowns:
        console.print(untrusted(f"unknown: {unknown}"))
    for package in result.unavailable_packages:
        console.print(untrusted(f"unavailable package (reported, not a gap): {package}"))
