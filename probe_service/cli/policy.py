"""``byte-probe policy``: administrator commands for the policy file.

A thin adapter: one library call (``check_policy_file``) and one place that
turns ``PolicyError`` into exit status 1 with a one-line message on stderr.
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
from probe_service.policies import check_policy_file, policy_digest, policy_file_path

from ..safe_text import safe_line, untrusted

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
    path = file or policy_file_path()
    try:
        policies = check_policy_file(path)
    except PolicyError as exc:
        sys.stderr.write(f"error: {safe_line(' '.join(str(exc).split()))}\n")
        raise typer.Exit(1) from None
    rows = [{"id": policy.id, "digest": policy_digest(policy)} for policy in policies]
    if as_json:
        sys.stdout.write(json.dumps({"file": str(path), "policies": rows}) + "\n")
        return
    table = Table(title=untrusted(path))
    table.add_column("id")
    table.add_column("digest (sha256)", overflow="fold")
    for row in rows:
        table.add_row(untrusted(row["id"]), row["digest"])
    Console().print(table)
