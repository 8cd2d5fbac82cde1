"""``byte-probe capabilities`` and ``byte-probe schema``: the table, described.

Both print the ``capabilities`` row of a ``cli`` session. Building it imports every part
behind the table (seconds on a small machine), so the document is kept in a per-user cache
keyed by a digest of this engine's source, the interpreter, pydantic and the environment
variables the engine reads, and trusted for ``CACHE_SECONDS`` (sandbox readiness can change
under the same key: a ``make setup``); ``--fresh`` rebuilds it. This module imports nothing
heavy at load time (docs/ARCHITECTURE.md, "The operation table").
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import stat
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from probe_service.errors import InvalidInput
from probe_service.settings import COMPATIBILITY_PREFIX, Settings, read_settings

__all__ = ["CACHE_SECONDS", "cache_path", "capabilities", "capabilities_document", "schema"]

#: How long a cached capabilities document is served before it is rebuilt.
CACHE_SECONDS = 600
#: Environment names that change what ``capabilities`` reports (besides ``PROBE_*``).
_ENV_PREFIXES = ("PROBE_", "BYTE_PROBE_", COMPATIBILITY_PREFIX)
_ENV_NAMES = ("HOME", "PATH", "XDG_CACHE_HOME")
_PACKAGE = Path(__file__).resolve().parent.parent

FreshOption = Annotated[
    bool, typer.Option("--fresh", help="Rebuild the document instead of using the cache.")
]


def _cache_key(settings: Settings) -> str:
    """A digest of everything the document is computed from, except the machine's state."""
    digest = hashlib.sha256()
    for path in sorted(_PACKAGE.rglob("*.py")):
        digest.update(str(path.relative_to(_PACKAGE)).encode() + b"\0" + path.read_bytes())
    spec = importlib.util.find_spec("pydantic")
    if spec is not None and spec.origin:
        digest.update(Path(spec.origin).with_name("version.py").read_bytes())
    digest.update(sys.version.encode() + sys.executable.encode())
    env = sorted(
        (k, v)
        for k, v in settings.environment.items()
        if k.startswith(_ENV_PREFIXES) or k in _ENV_NAMES
    )
    digest.update(json.dumps(env).encode())
    return digest.hexdigest()


def cache_path(settings: Settings | None = None) -> Path:
    """Where this engine's cached capabilities document lives for these settings (the
    environment's when None); raises SettingsError."""
    settings = settings or read_settings()
    return settings.cache_dir / "byte-probe" / f"capabilities-{_cache_key(settings)[:32]}.json"


def _read_cache(path: Path) -> dict[str, Any] | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        # Only a fresh file of ours that no one else could have written.
        if (
            not stat.S_ISREG(info.st_mode)
            or info.st_uid != os.geteuid()
            or info.st_mode & 0o022
            or time.time() - info.st_mtime > CACHE_SECONDS
        ):
            return None
        try:
            document = json.loads(handle.read())
        except ValueError:
            return None
    return document if isinstance(document, dict) else None


def _write_cache(path: Path, document: dict[str, Any]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".capabilities-")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(document, handle)
        os.replace(tmp, path)
    except OSError:
        return  # a cache that cannot be written only costs time


def capabilities_document(fresh: bool = False) -> dict[str, Any]:
    """The ``capabilities`` row's JSON for the CLI face, from the cache when it is current."""
    settings = read_settings()
    path = cache_path(settings)
    document = None if fresh else _read_cache(path)
    if document is None:
        from .common import local_session

        with local_session(Path("."), settings) as svc:  # the row opens no store
            document = svc.call("capabilities", {"detail": True})
        _write_cache(path, document)
    return document


def capabilities(fresh: FreshOption = False) -> None:
    """Print what this engine offers as JSON: versions, every operation with its schemas,
    sandbox readiness.

    The document is cached per engine build and environment for up to 10 minutes
    (~/.cache/byte-probe); --fresh rebuilds it (after `make setup`, for example).

    Example: byte-probe capabilities | jq '.operations[].name'
    """
    typer.echo(json.dumps(capabilities_document(fresh), sort_keys=True))


def _operations(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {op["name"]: op for op in document["operations"]}


def schema(
    operation: Annotated[
        str | None, typer.Argument(help="One operation (default: every operation).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
    fresh: FreshOption = False,
    receipt: Annotated[
        int | None,
        typer.Option("--receipt", help="Print the JSON Schema of this receipt version instead."),
    ] = None,
) -> None:
    """Print the request and response JSON Schemas of the operations (or of one).

    Without --json: each operation's faces, description and request fields; with an
    OPERATION, its two schemas indented. With --receipt VERSION: the JSON Schema of that
    receipt version instead (as committed in schemas/receipt-v1.schema.json).

    Example: byte-probe schema probe_run --json; byte-probe schema --receipt 1
    """
    if receipt is not None:
        from probe_service.service.adapters import receipt_schema

        document = receipt_schema(receipt)
        typer.echo(json.dumps(document, sort_keys=True, indent=None if as_json else 2))
        return
    ops = _operations(capabilities_document(fresh))
    if operation is not None and operation not in ops:
        raise InvalidInput(f"operation: unknown {operation!r}; `byte-probe schema` lists them")
    chosen = [ops[operation]] if operation else list(ops.values())
    schemas = {
        op["name"]: {"request": op["request_schema"], "response": op["response_schema"]}
        for op in chosen
    }
    if as_json:
        typer.echo(json.dumps(schemas[operation] if operation else schemas, sort_keys=True))
        return
    for op in chosen:
        typer.echo(f"{op['name']} ({', '.join(op['faces'])})")
        typer.echo(f"  {op['description']}")
        if operation:
            typer.echo(json.dumps(schemas[op["name"]], indent=2, sort_keys=True))
            continue
        request = op["request_schema"]
        required = set(request.get("required", []))
        for name, prop in request.get("properties", {}).items():
            mark = "" if name in required else f" = {json.dumps(prop.get('default'))}"
            text = " ".join(prop.get("description", "").split())
            typer.echo(f"    {name}{mark}" + (f": {text}" if text else ""))
