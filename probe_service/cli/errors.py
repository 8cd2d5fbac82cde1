"""The one-line error report every CLI failure ends in, with the error class's exit code.

What is not a refusal of ours is translated here, once, into the tree
(``probe_service.errors``): click's usage errors, an ``OSError``, input that ended at a
prompt, and a bug. Kept free of heavy imports: the root app needs it before any command
group is loaded.
"""

from __future__ import annotations

import json
import sys

import typer
from typer._click.exceptions import ClickException
from typer._click.globals import get_current_context

from probe_service.errors import (
    EXIT_INFRASTRUCTURE,
    EXIT_INPUT,
    EXIT_INTERNAL,
    Aborted,
    InternalError,
    OSFailure,
    ProbeServiceError,
    UsageError,
)

__all__ = ["EXIT_INFRASTRUCTURE", "EXIT_INPUT", "EXIT_INTERNAL", "as_refusal", "report_error"]


def as_refusal(exc: Exception) -> ProbeServiceError:
    """``exc`` as an error of the tree: itself, or its translation (InternalError for a bug)."""
    if isinstance(exc, ProbeServiceError):
        return exc
    if isinstance(exc, typer.Abort):
        return Aborted("aborted")
    if isinstance(exc, ClickException):
        return UsageError(exc.format_message())
    if isinstance(exc, OSError):
        return OSFailure(f"{exc.filename or ''}: {exc.strerror or exc}")
    return InternalError(
        f"internal error ({type(exc).__name__}): {exc}; rerun with BYTE_PROBE_DEBUG=1"
    )


def report_error(error: ProbeServiceError, as_json: bool, prog: str | None = None) -> int:
    """Print one line on stderr, and an error frame on stdout when JSON was asked for;
    return the error's exit code. The line starts with the program's name as it was
    called (``byte-probe`` or its compatibility name ``za``)."""
    # Imported here: safe_text loads rich, which `--help` does not need.
    from probe_service.safe_text import safe_line

    # Messages may quote untrusted text (a plan field, a path): one visible line.
    line = safe_line(" ".join(str(error).split()))
    sys.stderr.write(f"{prog or _program()}: error: {line}\n")
    if as_json:
        sys.stdout.write(json.dumps({"error": error.code, "message": line}) + "\n")
    return error.exit_code


def _program() -> str:
    context = get_current_context(silent=True)
    name = context.find_root().info_name if context is not None else None
    return name or "byte-probe"
