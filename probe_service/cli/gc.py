"""``byte-probe gc``: remove what the policy file's retention no longer keeps."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from .common import JsonOption, RootOption, console, emit_json, session
from .tables import print_table


def gc(
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count what would go per kind; remove nothing.")
    ] = False,
    root: RootOption = Path("."),
    json_out: JsonOption = False,
) -> None:
    """Remove runs, receipts, envelopes, plans, snapshots, blobs and events past the
    policy file's retention that no floor keeps, in audited batches (administrator).

    Example: byte-probe gc --dry-run
    """
    with session(root) as svc:
        report = svc.store_gc(dry_run=dry_run)
    if json_out:
        emit_json(report.model_dump())
        return
    verb = "would remove" if report.dry_run else "removed"
    table = Table(title=f"gc ({verb}; policy {report.policy_digest[:12]})")
    for column in ("kind", verb, "logical bytes", "database bytes"):
        table.add_column(column, justify="left" if column == "kind" else "right")
    for k in report.kinds:
        table.add_row(k.kind, str(k.removed), f"{k.logical_bytes:,}", f"{k.stored_bytes:,}")
    print_table(console, table)
    console.print(
        f"batches: {report.batches}; event floor: {report.event_floor}; "
        f"leftover run directories removed: {report.run_dirs_swept}"
    )
