"""``byte-probe snapshot …``: capture, show and materialize snapshots."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from probe_service.safe_text import untrusted

from .common import JsonOption, RootOption, console, emit_json, session
from .tables import print_table

app = typer.Typer(help="Capture, show and materialize content-addressed snapshots.")


@app.command("capture")
def capture(
    path: Annotated[
        Path, typer.Argument(help="Working tree to capture (with --ref: the repository).")
    ] = Path("."),
    ref: Annotated[
        str | None,
        typer.Option(
            "--ref",
            help="Capture the tree of this commit, tag or branch from git objects "
            "(no checkout, no hook or filter).",
        ),
    ] = None,
    root: RootOption = Path("."),
    json_out: JsonOption = False,
) -> None:
    """Capture an immutable snapshot of a working tree, or (--ref) of a git ref's tree.

    Example: byte-probe snapshot capture . --ref origin/main --json
    """
    with session(root) as svc:
        result = svc.snapshot_capture(root=str(path), ref=ref)
    if json_out:
        emit_json(result)
        return
    table = Table(title="snapshot captured", show_header=False)
    for key, value in result.model_dump().items():
        if isinstance(value, dict):  # the git source: one line
            value = " ".join(f"{k}={v}" for k, v in value.items())
        shown = "; ".join(value) or "none" if isinstance(value, tuple) else value
        table.add_row(key, untrusted(shown))
    print_table(console, table)


@app.command("show")
def show(
    snapshot_id: str,
    root: RootOption = Path("."),
    json_out: JsonOption = False,
    wide: Annotated[bool, typer.Option("--wide", help="Full digests in the table.")] = False,
) -> None:
    """Show a snapshot's entries.

    Example: byte-probe snapshot show 3f2a… --json
    """
    with session(root) as svc:
        snapshot = svc.snapshot_get(snapshot_id=snapshot_id)
    if json_out:
        emit_json(
            {
                "snapshot_id": snapshot.snapshot_id,
                "files": snapshot.files,
                "bytes": snapshot.bytes,
                "entries": [e.model_dump() for e in snapshot.entries],
                "attribute_notes": list(snapshot.attribute_notes),
            }
        )
        return
    table = Table(title=untrusted(f"snapshot {snapshot.snapshot_id}"))
    for column in ("path", "kind", "exec", "size", "digest / target"):
        table.add_column(column)
    for e in snapshot.entries:
        digest = e.digest if wide else (e.digest or "")[:16]
        detail = digest if e.digest else f"-> {e.target}"
        if e.kind == "gitlink":
            detail = f"commit {e.commit} (submodule: materialized empty)"
        # Paths and link targets come from the repository: data, never markup.
        table.add_row(
            untrusted(e.path), e.kind, "x" if e.executable else "", str(e.size), untrusted(detail)
        )
    print_table(console, table)
    for note in snapshot.attribute_notes:  # repository text: data, never markup
        console.print(untrusted(f"git attributes: {note}"))


@app.command("materialize")
def materialize(
    snapshot_id: str,
    dest: Annotated[Path, typer.Argument(help="Absent or empty destination directory.")],
    root: RootOption = Path("."),
    json_out: JsonOption = False,
) -> None:
    """Rebuild a snapshot byte for byte into an empty directory.

    Example: byte-probe snapshot materialize 3f2a… /tmp/copy
    """
    with session(root) as svc:
        done = svc.snapshot_materialize(snapshot_id=snapshot_id, dest=str(dest))
    if json_out:
        emit_json({"snapshot_id": done.snapshot_id, "dest": str(dest), "files": done.files})
    else:
        console.print(untrusted(f"materialized {done.files} files into {dest}"))
