"""``byte-probe key``: administrator commands for receipt signing keys (CLI-only).

docs/ARCHITECTURE.md, "Signed receipts": the key is Ed25519; its fingerprint is the hex
SHA-256 of the raw public key bytes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .common import JsonOption, console, emit_json, session

__all__ = ["app"]

app = typer.Typer(help="Create receipt signing keys (administrator).", no_args_is_help=True)


@app.callback()
def key() -> None:
    """Administrator commands for receipt signing keys."""


@app.command("create")
def create(
    out: Annotated[Path, typer.Option("--out", help="Directory for the new key pair.")],
    json_out: JsonOption = False,
) -> None:
    """Create an Ed25519 key pair: signing-key.pem (0600) and signing-key.pub.pem.

    Point a worker at it with BYTE_PROBE_SIGNING_KEY=DIR/signing-key.pem, or put it beside
    the default policy file as ~/.zyte/agent/signing-key.pem.

    Example: byte-probe key create --out /etc/byte-probe/keys
    """
    with session(Path(".")) as svc:  # the admin row `key_create`; no store is opened
        made = svc.key_create(out=str(out))
    if json_out:
        emit_json(made)
    else:
        lines = (f"private key {made.private_key}", f"public key  {made.public_key}")
        console.print("\n".join((*lines, f"keyid       {made.keyid}")))
