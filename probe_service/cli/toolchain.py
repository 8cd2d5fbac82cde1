"""``byte-probe toolchain``: administrator commands to build and digest toolchains.

Admin-only and CLI-only (docs/ARCHITECTURE.md, "Toolchains"): they take file paths and run
the administrator's pip, so they never appear on the NDJSON host or MCP.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from probe_service.safe_text import untrusted

from .common import JsonOption, console, session

if TYPE_CHECKING:  # the adapters import every part; `--help` needs none of them
    from probe_service.service.adapters import ToolchainDigest

__all__ = ["app"]

app = typer.Typer(help="Build and digest toolchains (administrator).", no_args_is_help=True)


@app.callback()
def toolchain() -> None:
    """Administrator commands for toolchains a policy names."""


def _show(name: str, digest: ToolchainDigest, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps({"name": name, **digest.model_dump(mode="json")}, sort_keys=True))
        return
    console.print(untrusted(f"toolchain {name}: {digest.path}"))
    console.print(f"  sha256 {digest.sha256}")
    console.print(
        f"  {digest.files} files, {digest.directories} directories, {digest.links} links, "
        f"{digest.bytes} bytes"
    )
    for target in digest.external:
        console.print(untrusted(f"  {target.link} -> {target.path} (sha256 {target.sha256})"))
    for entry in digest.unreadable:
        console.print(untrusted(f"  warning: not readable by the probe uids: {entry}"))


@app.command("create")
def create(
    name: Annotated[str, typer.Argument(help="Toolchain name, as the policy will use it.")],
    python: Annotated[Path, typer.Option("--python", help="Base interpreter (absolute).")],
    requirements: Annotated[Path, typer.Option("--requirements", help="pip requirements file.")],
    dest: Annotated[Path, typer.Option("--dest", help="New directory for the toolchain.")],
    index_url: Annotated[
        str | None, typer.Option("--index-url", help="Package index (default: pip's own).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Create a virtualenv toolchain and install pinned requirements into it.

    Example: byte-probe toolchain create py311-pytest --python /usr/bin/python3.11
    --requirements requirements.txt --dest /opt/byte-probe/toolchains/py311-pytest
    """
    with session(Path(".")) as svc:  # the admin row `toolchain_create`; no store is opened
        digest: ToolchainDigest = svc.toolchain_create(
            name=name,
            python=str(python),
            requirements_file=str(requirements),
            dest=str(dest),
            index_url=index_url,
        )
    _show(name, digest, as_json)
    if not as_json:
        snippet = {
            "toolchains": {name: digest.path},
            "executable_pins": {"python3": f"{digest.path}/bin/python"},
        }
        console.print("  policy (schema 2) entries: " + json.dumps(snippet), markup=False)


@app.command("digest")
def digest(
    directory: Annotated[Path, typer.Argument(help="Toolchain root directory.")],
    as_json: JsonOption = False,
) -> None:
    """Check a toolchain root against the policy file's rules and print its digest.

    Example: byte-probe toolchain digest /opt/byte-probe/toolchains/py311-pytest --json
    """
    with session(Path(".")) as svc:  # the admin row `toolchain_digest`; no store is opened
        found: ToolchainDigest = svc.toolchain_digest(path=str(directory))
    _show(directory.name, found, as_json)
