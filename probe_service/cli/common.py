"""What every CLI command shares: the store it opens, JSON output, the exit codes."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import BaseModel
from rich.console import Console

from ..errors import InfrastructureError, InvalidInput, ProbeServiceError, UnstableWorkingTree
from ..safe_text import safe_line
from ..store import DATABASE_URL_ENV, Store, open_store

__all__ = [
    "EXIT_INFRASTRUCTURE",
    "EXIT_INPUT",
    "JsonOption",
    "RootOption",
    "console",
    "emit_json",
    "exit_code_for",
    "open_cli_store",
    "read_json_arg",
    "report_error",
]

#: Exit code of a usage or input error (bad flag, bad file, unknown id, refused path).
EXIT_INPUT = 3
#: Exit code when the store, broker or working tree was unavailable; retrying may help.
EXIT_INFRASTRUCTURE = 4

console = Console()

RootOption = Annotated[
    Path,
    typer.Option(
        "--root", help="Directory whose .zyte holds the embedded store.", show_default="."
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON document.")]


def exit_code_for(exc: ProbeServiceError) -> int:
    """The exit code of a refusal: 4 when retrying may help, else 3."""
    if isinstance(exc, InfrastructureError | UnstableWorkingTree):
        return EXIT_INFRASTRUCTURE
    return EXIT_INPUT


def report_error(message: str, code: str, as_json: bool) -> None:
    """Print one line on stderr, and an error frame on stdout when JSON was asked for."""
    # Messages may quote untrusted text (a plan field, a path): one visible line.
    line = safe_line(" ".join(message.split()))
    sys.stderr.write(f"byte-probe: error: {line}\n")
    if as_json:
        sys.stdout.write(json.dumps({"error": code, "message": line}) + "\n")


def read_json_arg(source: str, what: str, error: type[InvalidInput] = InvalidInput) -> Any:
    """Read JSON from a file path or '-' (stdin); raises ``error`` naming the source."""
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"{source}: cannot read {what} ({exc})") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{source}: {what} is not JSON ({exc})") from exc


def open_cli_store(root: Path) -> Store:
    """Open the store named by PROBE_DATABASE_URL, else the embedded one under ``root``."""
    return open_store(root, os.environ.get(DATABASE_URL_ENV) or None)


def emit_json(value: BaseModel | dict[str, Any] | list[Any]) -> None:
    """Print ``value`` as one JSON document on stdout."""
    if isinstance(value, BaseModel):
        text = value.model_dump_json()
    else:
        text = json.dumps(value, default=_default, sort_keys=True)
    typer.echo(text)


def _default(value: object) -> object:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    raise TypeError(f"not JSON serializable: {type(value).__name__}")
