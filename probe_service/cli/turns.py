"""``byte-probe turns``: agent turns and every dispatch decision (docs/ARCHITECTURE.md,
"The agent's turn")."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from probe_service.safe_text import untrusted

from .common import JsonOption, RootOption, console, emit_json, session


def turns(
    limit: Annotated[int, typer.Option("--limit", help="At most this many turns.")] = 50,
    root: RootOption = Path("."),
    json_out: JsonOption = False,
) -> None:
    """List the newest agent turns with their answers and each dispatch decision (tool,
    posture, verdict, reasons), newest turn first.

    Example: byte-probe turns --limit 10 --json
    """
    with session(root) as svc:
        found = svc.turn_list(limit=limit).turns
    if json_out:
        emit_json({"turns": [t.model_dump(mode="json") for t in found]})
        return
    table = Table(title="turns")
    for column in ("turn", "scope", "answer", "stable", "tool", "posture", "verdict", "reasons"):
        table.add_column(column)
    for t in found:
        stable = "-" if t.stable is None else ("yes" if t.stable else "no")
        head = (untrusted(t.turn_id), untrusted(t.scope), untrusted(t.claim_id or "-"))
        if not t.decisions:
            table.add_row(*head, stable, "", "", "", "")
        for d in t.decisions:
            why = "; ".join(f"{r.kind} {r.claim_id}" for r in d.reasons) or d.message
            table.add_row(*head, stable, untrusted(d.tool), d.posture, d.verdict, untrusted(why))
    console.print(table)
