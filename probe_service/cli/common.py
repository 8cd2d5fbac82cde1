"""What every CLI command shares: the session it opens, JSON output, the exit codes."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import BaseModel
from rich.console import Console

from probe_service.errors import InvalidInput

from .context import current_cli_context
from .errors import EXIT_INFRASTRUCTURE, EXIT_INPUT, report_error

if TYPE_CHECKING:
    from probe_service.service import ProbeService
    from probe_service.service.methods import OperationMethods
    from probe_service.settings import Settings

__all__ = [
    "EXIT_INFRASTRUCTURE",
    "EXIT_INPUT",
    "JsonOption",
    "RootOption",
    "console",
    "emit_json",
    "local_session",
    "read_json_arg",
    "read_public_key",
    "report_error",
    "session",
]

console = Console()

RootOption = Annotated[
    Path,
    typer.Option(
        "--root", help="Directory whose .zyte holds the embedded store.", show_default="."
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON document.")]


@contextmanager
def session(root: Path, settings: Settings | None = None) -> Iterator[OperationMethods]:
    """The operations for one command: through the local service when PROBE_SERVE_SOCKET
    is set (docs/ARCHITECTURE.md, "Local service": the host face's operations run there,
    as an agent's request of this user; the others in-process), else ``local_session``.
    Raises SettingsError for a bad setting, ServiceUnavailable for a socket that does not
    answer."""
    from probe_service.settings import read_settings

    settings = settings or read_settings()
    if settings.serve_socket is None:
        with local_session(root, settings) as svc:
            yield svc
        return
    from probe_service.faces.serve_client import RemoteService, ServiceClient

    def in_process() -> ProbeService:
        from probe_service.service import ProbeService

        backend = current_cli_context().backend
        return ProbeService.open(
            root, settings=settings, interface="cli", lazy=True, backend=backend
        )

    with RemoteService(ServiceClient(settings.serve_socket), in_process) as remote:
        yield remote


@contextmanager
def local_session(root: Path, settings: Settings | None = None) -> Iterator[ProbeService]:
    """One ``ProbeService`` session for one command, labelled ``cli`` in the audit log: the
    store named by PROBE_DATABASE_URL, else the embedded one under ``root``, and the queue
    when PROBE_REDIS_URL is set, all from ``settings`` (read from the environment now when
    None: docs/ARCHITECTURE.md, "Settings"). Raises SettingsError for a bad setting."""
    # Imported here: the service pulls in the store and every part; `--help` needs none.
    from probe_service.service import ProbeService

    # Lazy: commands that need no store (verify, policy check) create no state directory.
    backend = current_cli_context().backend
    with ProbeService.open(
        root, settings=settings, interface="cli", lazy=True, backend=backend
    ) as svc:
        yield svc


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


def read_public_key(path: Path) -> str:
    """The PEM text of a public key file the user named; raises KeyFileError naming it.

    The one reader of key files is the signing part's (``plans/signing.read_public_key``,
    through ``service.adapters``), imported when a command names a key ("Start-up")."""
    from probe_service.service.adapters import read_public_key as read_key_file

    return read_key_file(path)


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
