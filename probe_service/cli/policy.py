"""``byte-probe policy``: administrator commands for the policy file.

A thin adapter over the admin row ``policy_check``. A refused file is the check's verdict,
not a usage error: exit 1 with one ``error:`` line (the only error this module reports
itself, as ``receipt verify`` does for an invalid receipt; every other error goes to the
root app's one handler).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from probe_service.errors import PolicyError
from probe_service.safe_text import safe_line, untrusted

from .common import session
from .tables import print_table

if TYPE_CHECKING:  # the adapters import every part; `--help` needs none of them
    from probe_service.service.adapters import ClearingRule, PolicyReport

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
    the file's safety rules; both must be reachable by the probe uids. Pass-through
    environment names (whose value is the worker's) are warned about on stderr.

    Example: byte-probe policy check --file /etc/byte/probe-policies.json --json
    """
    try:
        with session(Path(".")) as svc:  # the admin row `policy_check`; no store is opened
            checked = svc.policy_check(file=str(file) if file else None)
    except PolicyError as exc:
        sys.stderr.write(f"error: {safe_line(' '.join(str(exc).split()))}\n")
        raise typer.Exit(1) from None
    # Warnings go to stderr either way, so a pipeline reading --json still sees them.
    for report in checked.policies:
        for warning in report.warnings:
            sys.stderr.write(f"warning: policy {safe_line(report.id)}: {safe_line(warning)}\n")
    if as_json:
        rows = [report.model_dump(mode="json") for report in checked.policies]
        document = {
            "file": checked.file,
            "policies": rows,
            "principals": checked.principals,
            "clearing": [rule.model_dump(mode="json") for rule in checked.clearing],
        }
        sys.stdout.write(json.dumps(document) + "\n")
        return
    _print_reports(Path(checked.file), list(checked.policies))
    for line in clearing_lines(checked.clearing, checked.principals):
        typer.echo(line)


def clearing_lines(rules: Sequence[ClearingRule], principals: Mapping[str, str]) -> list[str]:
    """The clearing rules in force, one line per scope and resolution (docs/ARCHITECTURE.md,
    "Principals and clearing")."""
    from probe_service.service.adapters import CLEARED

    lines = ["clearing (who may resolve; rechecked: anyone whose evidence agrees):"]
    if not rules:
        lines.append(
            "  no rules: every person resolves directly (the single-user workflow); "
            "agents never accept a risk"
        )
    for rule in rules:
        for resolution in CLEARED:
            perm = rule.permission(resolution)
            if perm is None:
                lines.append(f"  {safe_line(rule.scope)} {resolution}: no one")
                continue
            who = ", ".join([*perm.users, *(f"any {k}" for k in perm.kinds)]) or "no one"
            review = (
                f"; a second person approves ({', '.join(perm.reviewers)})"
                if perm.reviewers
                else ", directly"
            )
            lines.append(f"  {safe_line(rule.scope)} {resolution}: {safe_line(who)}{review}")
    if principals:
        kinds = ", ".join(f"{name}={kind}" for name, kind in sorted(principals.items()))
        lines.append(f"principals: {safe_line(kinds)}; any other user is a person on the CLI")
    return lines


@app.command("describe")
def describe(
    policy_id: Annotated[str, typer.Argument(help="A policy id (policy list names them).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Show what one policy allows, as an agent reads it (never a path of the host).

    Executables, limits, network, toolchain names and the environment: fixed values,
    names passed from the worker, names a plan may set.

    Example: byte-probe policy describe local-python-no-network --json
    """
    with session(Path(".")) as svc:  # the agent row `policy_describe`; no store is opened
        described = svc.policy_describe(policy_id=policy_id)
    if as_json:
        sys.stdout.write(json.dumps(described.model_dump(mode="json")) + "\n")
        return
    table = Table(title=untrusted(f"policy {described.id}"), show_header=False)
    for key, value in described.model_dump(mode="json").items():
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        table.add_row(key, untrusted(shown))
    print_table(Console(), table)


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
    print_table(Console(), table)
