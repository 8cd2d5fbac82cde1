"""Exit codes and the one-line error report every CLI failure ends in.

Kept free of heavy imports: the root app needs it before any command group is loaded.
"""

from __future__ import annotations

import json
import sys

from probe_service.errors import InfrastructureError, ProbeServiceError, UnstableWorkingTree

__all__ = ["EXIT_INFRASTRUCTURE", "EXIT_INPUT", "EXIT_INTERNAL", "exit_code_for", "report_error"]

#: Exit code of a usage or input error (bad flag, bad file, unknown id, refused path).
EXIT_INPUT = 3
#: Exit code when the store, broker or working tree was unavailable; retrying may help.
EXIT_INFRASTRUCTURE = 4
#: Exit code of an unexpected internal error (EX_SOFTWARE).
EXIT_INTERNAL = 70


def exit_code_for(exc: ProbeServiceError) -> int:
    """The exit code of a refusal: 4 when retrying may help, else 3."""
    if isinstance(exc, InfrastructureError | UnstableWorkingTree):
        return EXIT_INFRASTRUCTURE
    return EXIT_INPUT


def report_error(message: str, code: str, as_json: bool) -> None:
    """Print one line on stderr, and an error frame on stdout when JSON was asked for."""
    # Imported here: safe_text loads rich, which `--help` does not need.
    from probe_service.safe_text import safe_line

    # Messages may quote untrusted text (a plan field, a path): one visible line.
    line = safe_line(" ".join(message.split()))
    sys.stderr.write(f"byte-probe: error: {line}\n")
    if as_json:
        sys.stdout.write(json.dumps({"error": code, "message": line}) + "\n")
