"""What ``main`` hands every command of one CLI invocation (click's context object)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from typer._click.globals import get_current_context

if TYPE_CHECKING:
    from probe_service.service import SandboxBackend

__all__ = ["CliContext", "current_cli_context"]


@dataclass(frozen=True)
class CliContext:
    """Passed in by ``main``'s caller, never read from the command line or environment."""

    #: Where runs in this process execute; None: the real sandbox (docs/ARCHITECTURE.md,
    #: "Seams").
    backend: SandboxBackend | None = None


def current_cli_context() -> CliContext:
    """The running invocation's context; the default one outside ``main``."""
    ctx = get_current_context(silent=True)
    found = ctx.find_object(CliContext) if ctx is not None else None
    return found if found is not None else CliContext()
