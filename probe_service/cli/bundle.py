"""``byte-probe bundle``: carry evidence from one store to another in one file.

docs/ARCHITECTURE.md, "Bundles": ``export`` writes a selection (a snapshot, claims or a
scope) with everything it rests on; ``verify`` checks a file without a store; ``import``
(administrators) verifies everything first, then writes it in one transaction.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from probe_service.errors import UsageError
from probe_service.safe_text import safe_line

from .common import JsonOption, RootOption, console, emit_json, read_public_key, session

__all__ = ["app"]

app = typer.Typer(help="Export, verify and import evidence bundles.", no_args_is_help=True)

KeysOption = Annotated[
    list[Path] | None,
    typer.Option("--key", help="Public key (PEM) every receipt must be signed by; repeatable."),
]


@app.callback()
def bundle() -> None:
    """Export, verify and import evidence bundles."""


def _counts(objects: dict[str, int]) -> str:
    return ", ".join(f"{n} {kind}" for kind, n in objects.items()) or "nothing"


@app.command("export")
def export(
    out: Annotated[
        Path, typer.Option("--out", help="The bundle file to write (never overwritten).")
    ],
    snapshot: Annotated[
        str | None, typer.Option("--snapshot", help="A snapshot: its plans, receipts, claims.")
    ] = None,
    claim: Annotated[
        list[str] | None, typer.Option("--claim", help="A claim id (or prefix); repeatable.")
    ] = None,
    scope: Annotated[str | None, typer.Option("--scope", help="Every claim of a scope.")] = None,
    root: RootOption = Path("."),
    json_out: JsonOption = False,
) -> None:
    """Write one bundle: what a snapshot, claims or a scope rest on, with their history.

    Example: byte-probe bundle export --scope tinyparse --out tinyparse.bundle
    """
    if sum((snapshot is not None, bool(claim), scope is not None)) != 1:
        raise UsageError("bundle export: name exactly one of --snapshot, --claim, --scope")
    with session(root) as svc:
        made = svc.bundle_export(
            out=str(out), snapshot_id=snapshot, claim_ids=tuple(claim or ()), scope=scope
        )
    if json_out:
        emit_json(made)
        return
    console.print(
        f"bundle {made.bundle_id}: {made.path} ({made.bytes} bytes)",
        highlight=False,
        soft_wrap=True,
    )
    console.print(f"  {_counts(made.objects)}", highlight=False, soft_wrap=True)


@app.command("verify")
def verify(
    file: Annotated[Path, typer.Argument(help="The bundle file.")],
    key: KeysOption = None,
    json_out: JsonOption = False,
) -> None:
    """Check a bundle without a store; with --key every receipt must be signed by one.

    Example: byte-probe bundle verify tinyparse.bundle --key signing-key.pub.pem
    """
    keys = tuple(read_public_key(path) for path in key or [])
    with session(Path(".")) as svc:  # lazy: this row opens no store
        checked = svc.bundle_verify(path=str(file), public_keys=keys)
    if json_out:
        emit_json(checked)
        return
    console.print(
        f"bundle {checked.bundle_id}: verified (format {checked.format_version})", soft_wrap=True
    )
    console.print(f"  {_counts(checked.objects)}", highlight=False, soft_wrap=True)
    if not checked.signatures_checked:
        console.print("  signatures not checked (no --key): statements and commitments only")
    elif checked.signers:
        console.print(f"  signed by {', '.join(checked.signers)}", soft_wrap=True)


@app.command("import")
def import_(
    file: Annotated[Path, typer.Argument(help="The bundle file.")],
    require_signed: Annotated[
        list[Path] | None,
        typer.Option(
            "--require-signed", help="Public key (PEM) receipts must be signed by; repeatable."
        ),
    ] = None,
    allow_unsigned: Annotated[
        bool, typer.Option("--allow-unsigned", help="Accept receipts no listed key signed.")
    ] = False,
    root: RootOption = Path("."),
    json_out: JsonOption = False,
) -> None:
    """Import a bundle (administrator): verify everything, then write it in one transaction.

    Importing twice changes nothing; an object stored under the same id with other bytes
    is refused. Imported evidence never closes an obligation of this store.

    Example: byte-probe bundle import tinyparse.bundle --require-signed signing-key.pub.pem
    """
    if bool(require_signed) == allow_unsigned:
        raise UsageError("bundle import: name --require-signed KEY… or --allow-unsigned")
    keys = tuple(read_public_key(path) for path in require_signed or [])
    with session(root) as svc:
        done = svc.bundle_import(path=str(file), require_signed=keys, allow_unsigned=allow_unsigned)
    if json_out:
        emit_json(done)
        return
    verb = "imported" if done.written else "already stored, nothing written"
    console.print(f"bundle {done.bundle_id}: {verb}", highlight=False, soft_wrap=True)
    if done.written:
        console.print(f"  new: {_counts(done.created)}", highlight=False, soft_wrap=True)
    if done.already_stored:
        console.print(
            f"  already stored: {_counts(done.already_stored)}", highlight=False, soft_wrap=True
        )
    if done.allow_unsigned and done.unsigned_receipts:
        runs = ", ".join(safe_line(r) for r in done.unsigned_receipts)
        console.print(
            f"  accepted UNSIGNED (--allow-unsigned): receipts of runs {runs}", soft_wrap=True
        )
