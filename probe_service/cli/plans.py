"""``byte-probe plan …``, ``run`` and ``receipt …``: plans, sandboxed runs and receipts."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from probe_service.errors import (
    Conflict,
    InfrastructureError,
    InvalidInput,
    InvalidPlan,
    ReceiptInvalid,
)
from probe_service.safe_text import safe_line, untrusted
from probe_service.service import ProbeService
from probe_service.settings import REDIS_URL_ENV

from .common import (
    JsonOption,
    RootOption,
    console,
    emit_json,
    local_session,
    read_json_arg,
    read_public_key,
    session,
)
from .results import output_json, print_receipt
from .tables import print_table
from .waiting import NoticeOption, NoWorkerNotice

if TYPE_CHECKING:  # a plan read never imports the run machinery
    from probe_service.service.adapters import ProbeRunResult

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
    document = read_json_arg(file, "plan", InvalidPlan)
    with session(root) as svc:
        created = svc.probe_plan(plan=document)
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
    with session(root) as svc:
        stored = svc.probe_get(plan_id=plan_id)
    if json_out:
        emit_json({"plan_id": stored.plan_id, "plan": stored.plan})
        return
    # A plan's fields are untrusted text: never markup, never control sequences.
    table = Table(title=untrusted(f"plan {stored.plan_id}"), show_header=False)
    for key, value in stored.plan.items():
        table.add_row(untrusted(key), untrusted(json.dumps(value, ensure_ascii=False)))
    print_table(console, table)


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
    explain_reuse: Annotated[
        bool,
        typer.Option(
            "--explain-reuse",
            help="Say why a stored receipt did or did not answer: the inputs that differ "
            "from the newest receipt of the same plan.",
        ),
    ] = False,
    notice_after: NoticeOption = 10.0,
    root: RootOption = Path("."),
    json_out: JsonOption = False,
) -> None:
    """Run a plan in the sandbox under the named policy and print its receipt.

    With PROBE_REDIS_URL set the run goes through the queue to any worker (unless
    --inline); otherwise it runs in this process. --no-reuse executes either way.
    A queued run that no worker took within --timeout is cancelled; one still running
    then goes on (`byte-probe status RUN_ID` follows it).
    Exit codes: 0 supports, 1 refutes, 2 inconclusive, 3 usage or input error,
    4 store, broker or worker unavailable.

    Example: byte-probe run 9b1c… --policy local-python-no-network --explain-reuse
    """
    with local_session(root) as svc:
        result = _run(svc, plan_id, policy, not no_reuse, inline, (timeout, notice_after))
    if json_out:
        emit_json({**result.model_dump(exclude={"receipt"}), **output_json(result.receipt)})
    else:
        extra = {"reused": "yes" if result.reused else "no"}
        if explain_reuse:
            extra["reuse"] = result.reuse.explained()
        print_receipt(console, result.receipt, f"run {result.run_id}", extra)
    raise typer.Exit(RUN_EXIT[result.outcome])


def _run(
    svc: ProbeService,
    plan_id: str,
    policy: str,
    reuse: bool,
    inline: bool,
    waiting: tuple[float, float],
) -> ProbeRunResult:
    from probe_service.service.adapters import RunStatus  # a run loads the run machinery

    timeout, notice_after = waiting
    # Queued runs report each poll: say on stderr when no worker took the run in time.
    svc.on_progress = NoWorkerNotice(f"plan {plan_id}", notice_after, timeout)
    here = inline or svc.queue.embedded
    result = svc.probe_run(
        plan_id=plan_id,
        policy_id=policy,
        reuse=reuse,
        via="embedded" if inline else "auto",
        # A run in this process ends with it: it runs to its end (its policy bounds it).
        wait_seconds=None if here else timeout,
    )
    if not isinstance(result, RunStatus):
        return result
    run_id = result.run_id
    if result.state == "queued":
        # The caller gives up on it: a worker arriving later must never execute it.
        with contextlib.suppress(Conflict):
            svc.run_cancel(run_id=run_id)
            raise InfrastructureError(
                f"run {run_id}: no worker took it within {timeout}s, so it was cancelled; "
                f"is `byte-probe worker` running on this {REDIS_URL_ENV} and namespace?"
            )
    raise InfrastructureError(
        f"run {run_id}: not finished after {timeout}s; it goes on "
        f"(`byte-probe status {run_id}` follows it)"
    )


@receipt_app.command("show")
def receipt_show(
    receipt_id: Annotated[str, typer.Argument(help="Receipt sha256 or run id.")],
    root: RootOption = Path("."),
    json_out: JsonOption = False,
) -> None:
    """Show a stored receipt (JSON prints the whole verifiable document).

    Example: byte-probe receipt show 4e0f… --json > receipt.json
    """
    with session(root) as svc:
        shown = svc.receipt_get(receipt_id=receipt_id)
    if json_out:
        emit_json(shown)
        return
    from probe_service.service.adapters import parse_receipt

    receipt = parse_receipt(shown)
    run_id = receipt.operational.run_id
    print_receipt(console, receipt, f"receipt {receipt.receipt_sha256}", {"run": run_id or ""})


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
    with session(root) as svc:
        envelope = svc.receipt_export(receipt_id=receipt_id)
    text = json.dumps(envelope, sort_keys=True, indent=2) + "\n"
    if out is None:
        sys.stdout.write(text)
    else:
        out.write_text(text, encoding="utf-8")


_CASE_LIST_WORDS = {
    "none": "",
    "checked": "; JUnit case list checked against its digest",
    "not_checked": "; JUnit case list not checked: give --root",
}


@receipt_app.command("verify")
def receipt_verify(
    file: Annotated[str, typer.Argument(help="Receipt or DSSE envelope file, or - for stdin.")],
    key: Annotated[
        list[Path] | None,
        typer.Option("--key", help="Public key (PEM) that may have signed it; repeatable."),
    ] = None,
    root: Annotated[
        Path | None,
        typer.Option(
            "--root",
            help="Also check a version-2 receipt's JUnit case list in this store.",
            show_default="offline: not checked",
        ),
    ] = None,
    json_out: JsonOption = False,
) -> None:
    """Verify a receipt offline; exit 1 naming what no longer matches.

    An envelope (`receipt export --format intoto`) is checked against --key: signature,
    statement, subject and commitment. Without --key only the commitment is checked and
    the result says "unsigned-verified only". A version-2 receipt's JUnit case list is a
    blob in the store: with --root (or PROBE_DATABASE_URL) it is checked against its
    digest, counts and failing cases.

    Example: byte-probe receipt verify receipt.intoto.json --key signing-key.pub.pem
    """
    document = read_json_arg(file, "receipt", InvalidPlan)
    keys = [read_public_key(path) for path in key or []]
    try:
        if not isinstance(document, dict):
            raise ReceiptInvalid("receipt: not a JSON object")
        if keys and "payloadType" not in document:
            raise ReceiptInvalid(
                "signature: a receipt file carries no envelope; verify the file "
                "`receipt export --format intoto` writes"
            )
        # Offline: without --root the session opens no store for this row (it reads only
        # the policy file's revoked keys).
        with session(root or Path(".")) as svc:
            verified = svc.receipt_verify(
                document=document, public_keys=tuple(keys), from_store=root is not None
            )
        sha, signer = verified.receipt_sha256, verified.signer
    except ReceiptInvalid as exc:  # a verdict on the receipt, not a usage error: exit 1
        message = safe_line(" ".join(str(exc).split()))  # may quote the receipt's fields
        sys.stderr.write(f"byte-probe: receipt invalid: {message}\n")
        if json_out:
            emit_json({"valid": False, "error": message})
        raise typer.Exit(1) from None
    cases = _CASE_LIST_WORDS[verified.case_list]
    if json_out:
        emit_json(
            {
                "valid": True,
                "receipt_sha256": sha,
                "signer": signer or "unsigned",
                "case_list": verified.case_list,
            }
        )
    elif signer is None:
        typer.echo(f"receipt {sha} verifies: unsigned-verified only (commitment checked{cases})")
    else:
        also = f" ({cases.removeprefix('; ')})" if cases else ""
        typer.echo(f"receipt {sha} verifies: signed by {signer}{also}")
