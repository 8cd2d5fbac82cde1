"""``byte-probe policy``: administrator commands for the policy file.

A thin adapter over the admin row ``policy_check``. A refused file is the check's verdict,
not a usage error: exit 1 with one ``error:`` line (the only error this module reports
itself, as ``receipt verify`` does for an invalid receipt; every other error goes to the
root app's one handler).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from probe_service.errors import PolicyError
from probe_service.safe_text import safe_line, untrusted

from .common import session

__all__ = ["app"]

app = typer.Typer(help="Check administrator probe policies.", no_args_is_help=True)


@app.callback()
def policy() -> None:
    """Administrator commands for the probe policy file."""


@app.command("check")
def check(
    file: Annotated[
        Path | None,
        typer.Option("--file", help="Policy file (default: $BYTE_PROBE_POLICY_FILE or ~/.zyte)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Validate the policy file and list each policy's id and digest.

    Example: byte-probe policy check --file /etc/byte/probe-policies.json --json
    """
    try:
        with session(Path(".")) as svc:  # no store is opened for this row
            checked = svc.policy_check(file=str(file) if file else None)
    except PolicyError as exc:
        sys.stderr.write(f"error: {safe_line(' '.join(str(exc).split()))}\n")
        raise typer.Exit(1) from None
    rows = [{"id": p.id, "digest": p.digest} for p in checked.policies]
    if as_json:
        sys.stdout.write(json.dumps({"file": checked.file, "policies": rows}) + "\n")
        return
    table = Table(title=untrusted(checked.file))
    table.add_column("id")
    table.add_column("digest (sha256)", overflow="fold")
    for row in rows:
        table.add_row(untrusted(row["id"]), row["digest"])
    Console().print(table)
