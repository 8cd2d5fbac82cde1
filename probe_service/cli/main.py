"""The root ``byte-probe`` app and the one place errors become exit codes.

Command groups are registered by name and imported only when one runs (or its own help is
asked for): ``byte-probe --help`` and ``byte-probe capabilities`` never import the store,
the queue or the sandbox (docs/ARCHITECTURE.md, "The operation table").
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import typer

# typer 0.29 vendors click privately; pinned in pyproject so these imports stay valid.
from typer._click import Command, Context, HelpFormatter
from typer.core import TyperCommand, TyperGroup

from probe_service.errors import InternalError, ProbeServiceError

from .context import CliContext
from .errors import EXIT_INFRASTRUCTURE, EXIT_INPUT, EXIT_INTERNAL, as_refusal, report_error
from .pipes import quiet_broken_pipe

if TYPE_CHECKING:
    from probe_service.service import SandboxBackend

__all__ = ["COMMANDS", "EXIT_INTERNAL", "app", "entry_point", "load_command", "main"]


@dataclass(frozen=True)
class LazyCommand:
    """A command or group of the root app, imported from ``module`` when it runs."""

    module: str
    attribute: str
    #: The first line of its help, shown by ``byte-probe --help`` without importing it
    #: (tests/cli/test_lazy.py checks it against the real command's).
    summary: str


#: Every command of the root app, in the order ``--help`` lists them.
COMMANDS: dict[str, LazyCommand] = {
    "snapshot": LazyCommand(
        "snapshot", "app", "Capture, show and materialize content-addressed snapshots."
    ),
    "policy": LazyCommand("policy", "app", "Check administrator probe policies."),
    "key": LazyCommand("keys", "app", "Create receipt signing keys (administrator)."),
    "bundle": LazyCommand("bundle", "app", "Export, verify and import evidence bundles."),
    "toolchain": LazyCommand("toolchain", "app", "Build and digest toolchains (administrator)."),
    "store": LazyCommand("store", "app", "The store itself: migrations."),
    "gc": LazyCommand(
        "gc",
        "gc",
        "Remove runs, receipts, envelopes, plans, snapshots, blobs and events past the "
        "policy file's retention that no floor keeps, in audited batches (administrator).",
    ),
    "ts": LazyCommand("ts", "app", "TypeScript compiler boundaries of stored snapshots."),
    "plan": LazyCommand("plans", "plan_app", "Create and show immutable probe plans."),
    "receipt": LazyCommand("plans", "receipt_app", "Show, export and verify probe receipts."),
    "run": LazyCommand(
        "plans", "run", "Run a plan in the sandbox under the named policy and print its receipt."
    ),
    "worker": LazyCommand(
        "queue",
        "worker",
        "Start dramatiq workers on PROBE_REDIS_URL, restarting any that dies, until Ctrl-C.",
    ),
    "metrics": LazyCommand(
        "queue",
        "metrics",
        "Serve the farm's store-wide metrics (one endpoint per farm; workers serve their own).",
    ),
    "submit": LazyCommand(
        "queue", "submit", "Persist and enqueue many plans; with --wait, gate on their outcomes."
    ),
    "cancel": LazyCommand(
        "queue",
        "cancel",
        "Cancel a queued run so that no worker executes it; exit 3 if a worker took it.",
    ),
    "status": LazyCommand(
        "queue",
        "status",
        "Show where a run stands (queued, running, done) and its receipt once done.",
    ),
    "claim": LazyCommand("claims", "claim_app", "Record, show and check claims."),
    "change": LazyCommand("claims", "change_app", "Analyse a change between two snapshots."),
    "obligations": LazyCommand(
        "claims", "obligations_app", "List and resolve recheck obligations."
    ),
    "knowledge": LazyCommand("claims", "knowledge_app", "Query and record knowledge."),
    "gate": LazyCommand(
        "claims",
        "gate_command",
        "Check every claim in scope (default: the whole store) on one snapshot; exit 1 while "
        "an obligation on that snapshot in scope is open, or (with --require-signed) while any "
        "receipt evidence is not signed by one of the given keys.",
    ),
    "recheck": LazyCommand(
        "recheck",
        "recheck",
        "Rerun the evidence of every open obligation on a snapshot (in --scope, or those "
        "named), wait with progress, and resolve each one whose reruns all agree.",
    ),
    "events": LazyCommand(
        "events",
        "events",
        "List events with a cursor greater than --after (or than the consumer's acknowledged "
        "cursor), oldest first.",
    ),
    "turns": LazyCommand(
        "turns",
        "turns",
        "List the newest agent turns with their answers and each dispatch decision (tool, "
        "posture, verdict, reasons), newest turn first.",
    ),
    "hook": LazyCommand(
        "hook", "hook_app", "Answer an agent's hook events, or print their settings."
    ),
    "capabilities": LazyCommand(
        "reference",
        "capabilities",
        "Print what this engine offers as JSON: versions, every operation with its schemas, "
        "sandbox readiness.",
    ),
    "schema": LazyCommand(
        "reference",
        "schema",
        "Print the request and response JSON Schemas of the operations (or of one).",
    ),
    "host": LazyCommand(
        "faces", "host", "Serve the operation table as NDJSON on stdin/stdout until EOF."
    ),
    "mcp": LazyCommand(
        "faces", "mcp", "Serve the agent operations as MCP tools (byte_*), on stdio by default."
    ),
    "serve": LazyCommand(
        "faces",
        "serve",
        "Serve the host face's operations on a unix socket to every local user, as root.",
    ),
    "web": LazyCommand(
        "web", "web", "Serve a read-only view of the farm, runs, receipts, snapshots and claims."
    ),
    "demo": LazyCommand(
        "demo", "demo", "Run the main job on the shipped example repository and print the result."
    ),
    "doctor": LazyCommand(
        "doctor",
        "doctor",
        "Check the sandbox prerequisites, the policy file, the store and Redis; exit 1 if any "
        "fail.",
    ),
}


def load_command(name: str) -> Command:
    """Import command ``name`` and build its click command (a group for a sub-app), as
    ``app.add_typer``/``app.command`` would have mounted it."""
    entry = COMMANDS[name]
    target = getattr(importlib.import_module(f"{__package__}.{entry.module}"), entry.attribute)
    parent = typer.Typer()
    parent.callback()(_mounted)  # a callback keeps the parent a group, as the root is
    if isinstance(target, typer.Typer):
        parent.add_typer(target, name=name)
    else:
        parent.command(name)(target)
    group = typer.main.get_command(parent)
    command: Command = group.commands[name]  # type: ignore[attr-defined]
    return command


def _mounted() -> None:
    """The parent of one mounted command (never shown)."""


@contextmanager
def _reporting(argv: Sequence[str], prog: str = "byte-probe") -> Iterator[list[int]]:
    """The one place an error becomes an exit code and one line on stderr (plus an error
    frame on stdout under ``--json``); yields a cell that holds the exit code."""
    as_json = "--json" in argv
    code = [0]
    try:
        yield code
    except Exception as exc:
        error = as_refusal(exc)
        # A bug, not a refusal: still one line, unless the operator asks for the trace.
        if isinstance(error, InternalError) and _debugging():
            raise
        code[0] = report_error(error, as_json, prog)


def _debugging() -> bool:
    """Whether ``BYTE_PROBE_DEBUG`` asks for a bug's traceback (never when the settings
    themselves are refused: that error is reported instead)."""
    from probe_service.settings import read_settings

    try:
        return read_settings().debug
    except ProbeServiceError:
        return False


class RootGroup(TyperGroup):
    """The root group: commands load on first use; errors are reported in ``main``."""

    _listing = False

    def list_commands(self, ctx: Context) -> list[str]:
        eager = super().list_commands(ctx)
        return [*eager, *(name for name in COMMANDS if name not in eager)]

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        if cmd_name in self.commands or cmd_name not in COMMANDS:
            return super().get_command(ctx, cmd_name)
        if self._listing:
            # Listed in the root's help: its summary, without importing the command.
            return TyperCommand(cmd_name, help=COMMANDS[cmd_name].summary)
        self.add_command(load_command(cmd_name), cmd_name)
        return self.commands[cmd_name]

    def format_help(self, ctx: Context, formatter: HelpFormatter) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """Run the CLI; every failure ends in the exit code ``_reporting`` chose."""
        argv = list(sys.argv[1:] if args is None else args)
        prog = prog_name or "byte-probe"
        with _reporting(argv, prog) as code:
            result = super().main(
                args=argv,
                prog_name=prog,
                complete_var=complete_var,
                standalone_mode=False,
                **extra,
            )
            code[0] = result if isinstance(result, int) else 0
        if standalone_mode:
            sys.exit(code[0])
        return code[0]


app = typer.Typer(
    name="byte-probe",
    cls=RootGroup,
    help=(
        "Byte probe service: snapshots, sandboxed probes, receipts and claims.\n\n"
        f"Exit codes: 0 ok; {EXIT_INPUT} usage or input error; "
        f"{EXIT_INFRASTRUCTURE} store, broker or working tree unavailable (retry). "
        "`run`, `submit` and `gate` document their own outcome codes."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,
    # Plain help for the root: rendering it with rich imports more than all else `--help`
    # needs. Command groups keep rich help (they are imported when asked for anyway).
    rich_markup_mode=None,
)


@app.callback()
def root() -> None:
    """Byte probe service: snapshots, sandboxed probes, receipts and claims."""


def main(
    argv: list[str] | None = None,
    *,
    backend: SandboxBackend | None = None,
    prog_name: str = "byte-probe",
) -> int:
    """Run the CLI and return its exit code; no traceback ever reaches the user.

    Runs in this process execute through ``backend``: the real sandbox unless a test
    passes another (docs/ARCHITECTURE.md, "Seams"); the console script never does."""
    command: Callable[..., Any] = typer.main.get_command(app).main
    obj = CliContext(backend=backend)
    # A reader that went away (`| head -1`) never changes the exit code: the outcome's.
    with quiet_broken_pipe():
        result = command(args=argv, prog_name=prog_name, standalone_mode=False, obj=obj)
    return int(result)


def entry_point() -> None:
    """Console-script entry: exit with ``main``'s code."""
    sys.exit(main())


def za_entry_point() -> None:
    """The compatibility name ``za`` (the agent the service lives in): the same commands,
    options and exit codes as ``byte-probe``, its usage lines under its own name."""
    sys.exit(main(prog_name="za"))
