"""The root ``byte-probe`` app and the one place errors become exit codes."""

from __future__ import annotations

import os
import sys

import typer

# typer 0.29 vendors click privately; pinned in pyproject so this import stays valid.
from typer._click.exceptions import ClickException

from ..errors import ProbeServiceError
from . import (
    claims,
    demo,
    doctor,
    events,
    faces,
    keys,
    plans,
    policy,
    queue,
    snapshot,
    store,
    toolchain,
    ts,
    web,
)
from .common import EXIT_INFRASTRUCTURE, EXIT_INPUT, exit_code_for, report_error

#: Exit code of an unexpected internal error (EX_SOFTWARE).
EXIT_INTERNAL = 70

app = typer.Typer(
    name="byte-probe",
    help=(
        "Byte probe service: snapshots, sandboxed probes, receipts and claims.\n\n"
        f"Exit codes: 0 ok; {EXIT_INPUT} usage or input error; "
        f"{EXIT_INFRASTRUCTURE} store, broker or working tree unavailable (retry). "
        "`run`, `submit` and `gate` document their own outcome codes."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,
)
app.add_typer(snapshot.app, name="snapshot")
app.add_typer(policy.app, name="policy")
app.add_typer(keys.app, name="key")
app.add_typer(toolchain.app, name="toolchain")
app.add_typer(store.app, name="store")
app.add_typer(ts.app, name="ts")
app.add_typer(plans.plan_app, name="plan")
app.add_typer(plans.receipt_app, name="receipt")
app.command("run")(plans.run)
app.command("worker")(queue.worker)
app.command("submit")(queue.submit)
app.command("cancel")(queue.cancel)
app.add_typer(claims.claim_app, name="claim")
app.add_typer(claims.change_app, name="change")
app.add_typer(claims.obligations_app, name="obligations")
app.add_typer(claims.knowledge_app, name="knowledge")
app.command("gate")(claims.gate_command)
app.command("events")(events.events)
app.command("demo")(demo.demo)
app.command("doctor")(doctor.doctor)
app.command("host")(faces.host)
app.command("mcp")(faces.mcp)
app.command("web")(web.web)


def _report(message: str, code: str, argv: list[str]) -> None:
    report_error(message, code, "--json" in argv)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code; no traceback ever reaches the user."""
    args = list(sys.argv[1:] if argv is None else argv)
    command = typer.main.get_command(app)
    try:
        result = command.main(args=args, prog_name="byte-probe", standalone_mode=False)
    except ProbeServiceError as exc:
        _report(str(exc), exc.code, args)
        return exit_code_for(exc)
    except typer.Abort:
        _report("aborted", "aborted", args)
        return 130
    except ClickException as exc:
        _report(exc.format_message(), "usage", args)
        return EXIT_INPUT
    except OSError as exc:
        _report(f"{exc.filename or ''}: {exc.strerror or exc}", "os_error", args)
        return EXIT_INPUT
    except Exception as exc:
        # A bug, not a refusal: still one line, unless the operator asks for the trace.
        if os.environ.get("BYTE_PROBE_DEBUG"):
            raise
        _report(
            f"internal error ({type(exc).__name__}): {exc}; rerun with BYTE_PROBE_DEBUG=1",
            "internal",
            args,
        )
        return EXIT_INTERNAL
    return result if isinstance(result, int) else 0


def entry_point() -> None:
    """Console-script entry: exit with ``main``'s code."""
    sys.exit(main())
