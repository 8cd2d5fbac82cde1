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
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from probe_service.errors import PolicyError
from probe_service.safe_text import safe_line, untrusted

from .common import session

if TYPE_CHECKING:  # the adapters import every part; `--help` needs none of them
    from probe_service.service.adapters import PolicyReport

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
    """Validate the policy file, verify every pin and toolchain, and print their digests.

    Each pin must be a regular executable file and each toolchain a directory that keeps
    the file's safety rules; both must be reachable by the probe uids.

    Example: byte-probe policy check --file /etc/byte/probe-policies.json --json
    """
    try:
        with session(Path(".")) as svc:  # the admin row `policy_check`; no store is opened
            checked = svc.policy_check(file=str(file) if file else None)
    except PolicyError as exc:
        sys.stderr.write(f"error: {safe_line(' '.join(str(exc).split()))}\n")
        raise typer.Exit(1) from None
    if as_json:
        rows = [report.model_dump(mode="json") for report in checked.policies]
        sys.stdout.write(json.dumps({"file": checked.file, "policies": rows}) + "\n")
        return
    _print_reports(Path(checked.file), list(checked.policies))


def _print_reports(path: Path, reports: list[PolicyReport]) -> None:
    table = Table(title=untrusted(path))
    table.add_column("policy / pin / toolchain")
    table.add_column("path")
    table.add_column("digest (sha256)", overflow="fold")
    for report in reports:
        table.add_row(untrusted(report.id), "", report.digest)
        for pin in report.pins:
            where = pin.pin if pin.pin == pin.resolved else f"{pin.pin} -> {pin.resolved}"
            table.add_row(untrusted(f"  pin {pin.executable}"), untrusted(where), pin.sha256)
        for toolchain in report.toolchains:
            size = f"{toolchain.files} files, {toolchain.bytes} bytes"
            table.add_row(
                untrusted(f"  toolchain {toolchain.name}"),
                untrusted(f"{toolchain.path} ({size})"),
                toolchain.sha256,
            )
    Console().print(table)
