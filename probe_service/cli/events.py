"""``byte-probe events``: read the monotonic event log after a cursor."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from probe_service.safe_text import untrusted

from .common import JsonOption, RootOption, console, emit_json, session
from .tables import print_table


def events(
    after: Annotated[int, typer.Option("--after", help="Only events after this cursor.")] = 0,
    limit: Annotated[int, typer.Option("--limit", help="At most this many events.")] = 1000,
    consumer: Annotated[
        str | None,
        typer.Option("--consumer", help="Resume after the cursor this named consumer acked."),
    ] = None,
    ack: Annotated[
        int | None,
        typer.Option("--ack", help="With --consumer: first acknowledge events up to here."),
    ] = None,
    root: RootOption = Path("."),
    json_out: JsonOption = False,
) -> None:
    """List events with a cursor greater than --after (or than the consumer's
    acknowledged cursor), oldest first.

    Example: byte-probe events --consumer ci-bot --ack 41 --json
    """
    with session(root) as svc:
        found = svc.knowledge_events(after=after, limit=limit, consumer=consumer, ack=ack).events
    if json_out:  # a list, as before the table wrapped it in {"events", "next_after"}
        emit_json([e.model_dump() for e in found])
        return
    table = Table(title="events")
    for column in ("cursor", "kind", "subject", "created"):
        table.add_column(column)
    for e in found:
        table.add_row(
            str(e.cursor), untrusted(e.kind), untrusted(e.subject), untrusted(e.created_at)
        )
    print_table(console, table)
