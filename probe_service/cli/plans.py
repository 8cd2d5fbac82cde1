"""``byte-probe plan …``, ``run`` and ``receipt …``: plans, sandboxed runs and receipts."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from .. import service
from ..errors import InvalidInput, InvalidPlan, ReceiptInvalid
from ..queue import REDIS_URL_ENV, ProbeQueue
from .common import JsonOption, RootOption, console, emit_json, open_cli_store, read_json_arg

plan_app = typer.Typer(help="Create and show immutable probe plans.", no_args_is_help=True)
receipt_app = typer.Typer(help="Show, export and verify probe receipts.", no_args_is_help=True)

#: Exit codes of `run`, by outcome.
RUN_EXIT = {"supports": 0, "refutes": 1, "inconclusive": 2}


@plan_app.command("create")
def plan_create(
    file: Annotated[str, typer.Argument(help="Plan JSON file, or - for stdin.")],
    root: RootOption = Path("."),
    json_out: JsonOption = False,
) -> None:
    """Validate and persist a plan; print its content id. Never executes anything.

    Example: byte-probe plan create plan.json --json
    """
    created = service.probe_plan(open_cli_store(root), read_json_arg(file, "plan", InvalidPlan))
    if json_out:
        emit_json(created)
    else:
        state = "created" if created.created else "already stored"
        console.print(f"plan {created.plan_id} ({state})")


@plan_app.command("show")
def plan_show(plan_id: str, root: RootOption = Path("."), json_out: JsonOption = False) -> None:
    """Show a stored plan.

    Example: byte-probe plan show 9b1c… --json
    """
    plan = service.probe_get(open_cli_store(root), plan_id)
    if json_out:
        emit_json({"plan_id": plan_id, "plan": plan.canonical()})
        return
    table = Table(title=f"plan {plan_id}", show_header=False)
    for key, value in plan.canonical().items():
        table.add_row(key, json.dumps(value, ensure_ascii=False))
    console.print(table)


def run(
    plan_id: str,
    policy: Annotated[str, typer.Option("--policy", help="Policy id; must equal the plan's.")],
    no_reuse: Annotated[
        bool, typer.Option("--no-reuse", help="Execute even if a receipt for this action exists.")
    ] = False,
    inline: Annotated[
        bool, typer.Option("--inline", help="Run here even when PROBE_REDIS_URL is set.")
    ] = False,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds to wait for a queued run's worker.")
    ] = 3600.0,
    root: RootOption = Path("."),
    json_out: JsonOption = False,
) -> None:
    """Run a plan in the sandbox under the named policy and print its receipt.

    With PROBE_REDIS_URL set the run goes through the queue to any worker (unless
    --inline); otherwise it runs in this process. --no-reuse executes either way.
    Exit codes: 0 supports, 1 refutes, 2 inconclusive, 3 usage or input error,
    4 store, broker or worker unavailable.

    Example: byte-probe run 9b1c… --policy local-python-no-network --json
    """
    store = open_cli_store(root)
    url = os.environ.get(REDIS_URL_ENV)
    if url and not inline:
        queue = ProbeQueue(url)
        try:
            result = service.probe_run_queued(
                store, queue, plan_id, policy, timeout_s=timeout, reuse=not no_reuse
            )
        finally:
            queue.close()
    else:
        result = service.probe_run(store, plan_id, policy, reuse=not no_reuse)
    if json_out:
        emit_json(result.model_dump(exclude={"receipt"}))
    else:
        table = Table(title=f"run {result.run_id}", show_header=False)
        for key in ("outcome", "reason", "status", "exit_code", "reused", "receipt_sha256"):
            table.add_row(key, str(getattr(result, key)))
        console.print(table)
        if result.stdout:
            console.print(
                f"[dim]stdout:[/dim] {result.stdout[:2000]}", markup=True, highlight=False
            )
    raise typer.Exit(RUN_EXIT[result.outcome])


@receipt_app.command("show")
def receipt_show(
    receipt_id: Annotated[str, typer.Argument(help="Receipt sha256 or run id.")],
    root: RootOption = Path("."),
    json_out: JsonOption = False,
) -> None:
    """Show a stored receipt (JSON prints the whole verifiable document).

    Example: byte-probe receipt show 4e0f… --json > receipt.json
    """
    receipt = service.receipt_get(open_cli_store(root), receipt_id)
    if json_out:
        emit_json(receipt)
        return
    committed = receipt["committed"]
    table = Table(title=f"receipt {receipt['receipt_sha256']}", show_header=False)
    for key in ("outcome", "reason", "status", "exit_code", "plan_id", "snapshot_id", "policy_id"):
        table.add_row(key, str(committed[key]))
    console.print(table)


@receipt_app.command("export")
def receipt_export(
    receipt_id: Annotated[str, typer.Argument(help="Receipt sha256 or run id.")],
    fmt: Annotated[
        str, typer.Option("--format", help="Export format: intoto (a DSSE envelope).")
    ] = "intoto",
    out: Annotated[Path | None, typer.Option("--out", help="Write here instead of stdout.")] = None,
    root: RootOption = Path("."),
) -> None:
    """Export a signed receipt as an in-toto statement in a DSSE envelope.

    Example: byte-probe receipt export 4e0f… --format intoto --out receipt.intoto.json
    """
    if fmt != "intoto":
        raise InvalidInput(f"--format: unknown format {fmt!r} (intoto)")
    envelope = service.receipt_export(open_cli_store(root), receipt_id)
    text = json.dumps(envelope, sort_keys=True, indent=2) + "\n"
    if out is None:
        sys.stdout.write(text)
    else:
        out.write_text(text, encoding="utf-8")


@receipt_app.command("verify")
def receipt_verify(
    file: Annotated[str, typer.Argument(help="Receipt or DSSE envelope file, or - for stdin.")],
    key: Annotated[
        list[Path] | None,
        typer.Option("--key", help="Public key (PEM) that may have signed it; repeatable."),
    ] = None,
    json_out: JsonOption = False,
) -> None:
    """Verify a receipt offline; exit 1 naming what no longer matches.

    An envelope (`receipt export --format intoto`) is checked against --key: signature,
    statement, subject and commitment. Without --key only the commitment is checked and
    the result says "unsigned-verified only".

    Example: byte-probe receipt verify receipt.intoto.json --key signing-key.pub.pem
    """
    document = read_json_arg(file, "receipt", InvalidPlan)
    keys = list(key or [])
    signer: str | None = None
    try:
        if isinstance(document, dict) and "payloadType" in document:
            verified = service.envelope_verify(document, keys)
            sha, signer = verified.receipt_sha256, verified.signer
        elif keys:
            raise ReceiptInvalid(
                "signature: a receipt file carries no envelope; verify the file "
                "`receipt export --format intoto` writes"
            )
        else:
            sha = service.receipt_verify(document)
    except ReceiptInvalid as exc:  # a verdict on the receipt, not a usage error: exit 1
        message = " ".join(str(exc).split())
        sys.stderr.write(f"byte-probe: receipt invalid: {message}\n")
        if json_out:
            emit_json({"valid": False, "error": message})
        raise typer.Exit(1) from None
    if json_out:
        emit_json({"valid": True, "receipt_sha256": sha, "signer": signer or "unsigned"})
    elif signer is None:
        typer.echo(f"receipt {sha} verifies: unsigned-verified only (commitment checked)")
    else:
        typer.echo(f"receipt {sha} verifies: signed by {signer}")
