"""CLI sub-apps for claims: ``claim``, ``change``, ``obligations``, ``knowledge`` and ``gate``.

Thin adapters: each command opens one ``cli`` session, calls one row of the operation table
and prints the result (``--json`` for machines: the lists keep their shape, not the table's
``{"obligations": [...]}`` wrappers). Errors become exit codes in one place, the root app
(``probe_service.cli.main``); ``gate`` exits 1 while an obligation in scope is open.

Mount in the main app::

    app.add_typer(claim_app, name="claim")
    app.add_typer(change_app, name="change")
    app.add_typer(obligations_app, name="obligations")
    app.add_typer(knowledge_app, name="knowledge")
    app.command("gate")(gate_command)
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer
from pydantic import BaseModel

from probe_service.errors import InvalidClaim, InvalidInput, OSFailure, UsageError
from probe_service.safe_text import safe_text
from probe_service.service.adapters import (
    RESOLUTIONS,
    ChangeAnalysis,
    ClaimCheck,
    Obligation,
    ReviewRequest,
    render_gate_junit,
    render_gate_markdown,
    render_gate_text,
)

from .common import read_json_arg, read_public_key, session

__all__ = ["change_app", "claim_app", "gate_command", "knowledge_app", "obligations_app"]

claim_app = typer.Typer(help="Record, show and check claims.", no_args_is_help=True)
change_app = typer.Typer(help="Analyse a change between two snapshots.", no_args_is_help=True)
obligations_app = typer.Typer(help="List and resolve recheck obligations.", no_args_is_help=True)
knowledge_app = typer.Typer(help="Query and record knowledge.", no_args_is_help=True)

EXIT_GATE_CLOSED = 1

RootOpt = Annotated[Path, typer.Option("--root", help="Directory holding .zyte (default: cwd).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]
ScopeOpt = Annotated[str | None, typer.Option("--scope", help="Project key to confine to.")]
AllowEmptyOpt = Annotated[
    bool,
    typer.Option(
        "--allow-empty",
        help="Accept a scope (or store) without a live claim instead of refusing it (exit 3).",
    ),
]


def _emit(value: BaseModel | Sequence[BaseModel], as_json: bool, text: str) -> None:
    if as_json:
        data = (
            value.model_dump(mode="json")
            if isinstance(value, BaseModel)
            else [v.model_dump(mode="json") for v in value]
        )
        typer.echo(json.dumps(data, indent=2, sort_keys=True))
    else:
        # Claim text, paths and reasons are untrusted: controls shown, never sent raw.
        typer.echo(safe_text(text))


@claim_app.command("create")
def claim_create_command(
    file: Annotated[str, typer.Argument(help="Claim JSON file, or - for stdin.")],
    allow_tombstoned: Annotated[
        bool, typer.Option("--allow-tombstoned", help="Record despite a withdrawn twin.")
    ] = False,
    allow_incomplete: Annotated[
        bool,
        typer.Option(
            "--allow-incomplete",
            help="Record a negative dependency whose result is incomplete (never applicable).",
        ),
    ] = False,
    as_json: JsonOpt = False,
    root: RootOpt = Path("."),
) -> None:
    """Record a claim; baselines are computed from its snapshot. An identical live claim
    is returned instead of a second one.

    Example: byte-probe claim create claim.json --json
    """
    with session(root) as svc:
        record = svc.claim_create(
            claim=read_json_arg(file, "claim", InvalidClaim),
            allow_tombstoned=allow_tombstoned,
            allow_incomplete=allow_incomplete,
        )
        flag = f" flagged={record.flagged}" if record.flagged else ""
        _emit(record, as_json, f"{record.claim_id} {record.outcome}{flag}")


@claim_app.command("show")
def claim_show_command(
    claim_id: Annotated[str, typer.Argument(help="Claim id.")],
    scope: ScopeOpt = None,
    as_json: JsonOpt = False,
    root: RootOpt = Path("."),
) -> None:
    """Show one claim with its evidence and baselines.

    Example: byte-probe claim show clm_0123... --scope payments
    """
    with session(root) as svc:
        record = svc.claim_show(claim_id=claim_id, scope=scope)
        _emit(
            record,
            as_json,
            f"{record.claim_id} [{record.scope}] {record.outcome}: {record.statement}",
        )


RepoOpt = Annotated[
    Path,
    typer.Option("--repo", help="Repository the refs are read from (default: --root)."),
]


@claim_app.command("check")
def claim_check_command(
    claim_ids: Annotated[list[str], typer.Argument(help="Claim ids.")],
    snapshot: Annotated[str | None, typer.Option("--snapshot", help="Target snapshot id.")] = None,
    ref: Annotated[
        str | None,
        typer.Option("--ref", help="Target git ref (its tree is captured from git objects)."),
    ] = None,
    repo: RepoOpt | None = None,
    scope: ScopeOpt = None,
    as_json: JsonOpt = False,
    root: RootOpt = Path("."),
) -> None:
    """Recheck claims against a snapshot (or a git ref): current, needs_recheck or unknown.

    Example: byte-probe claim check clm_01... clm_02... --snapshot 3fa4...
    """
    with session(root) as svc:
        checks = svc.claim_check(
            claim_ids=tuple(claim_ids),
            target_snapshot=snapshot,
            target_ref=ref,
            repository=str(repo or root),
            scope=scope,
        ).checks
        _emit(checks, as_json, "\n".join(_check_line(c) for c in checks))


@claim_app.command("withdraw")
def claim_withdraw_command(
    claim_id: Annotated[str, typer.Argument(help="Claim id.")],
    rationale: Annotated[str, typer.Option("--rationale", help="Why it is withdrawn.")],
    scope: ScopeOpt = None,
    as_json: JsonOpt = False,
    root: RootOpt = Path("."),
) -> None:
    """Withdraw a claim, leaving a tombstone.

    Example: byte-probe claim withdraw clm_01... --rationale "wrong premise"
    """
    with session(root) as svc:
        tomb = svc.claim_withdraw(claim_id=claim_id, rationale=rationale, scope=scope)
        _emit(tomb, as_json, f"{tomb.claim_id} withdrawn")


def _check_line(check: ClaimCheck) -> str:
    reasons = "; ".join(check.reasons)
    return f"{check.claim_id} {check.state}" + (f" ({reasons})" if reasons else "")


@change_app.command("analyze")
def change_analyze_command(
    from_snapshot: Annotated[
        str | None, typer.Argument(help="Snapshot before the change (or --base).")
    ] = None,
    to_snapshot: Annotated[
        str | None, typer.Argument(help="Snapshot after the change (or --head).")
    ] = None,
    base: Annotated[str | None, typer.Option("--base", help="Git ref before the change.")] = None,
    head: Annotated[str | None, typer.Option("--head", help="Git ref after the change.")] = None,
    repo: RepoOpt | None = None,
    scope: ScopeOpt = None,
    allow_empty: AllowEmptyOpt = False,
    as_json: JsonOpt = False,
    root: RootOpt = Path("."),
) -> None:
    """Open obligations for claims the change makes stale (idempotent); the two sides are
    snapshot ids, or git refs (--base, --head) whose trees are captured from git objects.

    Example: byte-probe change analyze --base origin/main --head HEAD --json
    """
    if base is not None and head is None and from_snapshot is not None:
        from_snapshot, to_snapshot = None, from_snapshot  # --base REF with one snapshot id
    with session(root) as svc:
        result = svc.change_analyze(
            from_snapshot=from_snapshot,
            to_snapshot=to_snapshot,
            from_ref=base,
            to_ref=head,
            repository=str(repo or root),
            scope=scope,
            allow_empty=allow_empty,
        )
        summary = (
            f"{len(result.changed_paths)} changed path(s), {result.candidates} candidate "
            f"claim(s), {len(result.opened)} obligation(s) opened"
        )
        _emit(result, as_json, summary)


@obligations_app.command("list")
def obligations_list_command(
    only_open: Annotated[bool, typer.Option("--open", help="Only open obligations.")] = False,
    scope: ScopeOpt = None,
    claim_id: Annotated[str | None, typer.Option("--claim", help="Only this claim.")] = None,
    as_json: JsonOpt = False,
    root: RootOpt = Path("."),
) -> None:
    """List obligations.

    Example: byte-probe obligations list --open --scope payments --json
    """
    with session(root) as svc:
        found = svc.obligation_list(
            scope=scope, state="open" if only_open else None, claim_id=claim_id
        ).obligations
        _emit(found, as_json, "\n".join(_obligation_line(o) for o in found))


def _obligation_line(o: Obligation) -> str:
    line = f"{o.obligation_id} {o.state} {o.applicability} claim={o.claim_id} [{o.scope}]"
    if o.resolution is not None:
        by = f" by {o.resolved_by}" if o.resolved_by else ""
        line += f" {o.resolution} via {o.interface or '?'}{by}: {o.rationale}"
    return line


@obligations_app.command("resolve")
def obligations_resolve_command(
    obligation_id: Annotated[str, typer.Argument(help="Obligation id.")],
    resolution: Annotated[str, typer.Option("--resolution", help=", ".join(RESOLUTIONS))],
    rationale: Annotated[str, typer.Option("--rationale", help="Why; kept forever.")],
    receipt: Annotated[str | None, typer.Option("--receipt", help="For rechecked.")] = None,
    successor: Annotated[str | None, typer.Option("--successor", help="For superseded.")] = None,
    as_json: JsonOpt = False,
    root: RootOpt = Path("."),
) -> None:
    """Resolve an obligation with a retained rationale, as the OS user running it.

    Where the policy file's clearing rules ask a second person, this records a review
    request instead (see "obligations review"); the obligation stays open until then.

    Example: byte-probe obligations resolve obl_01... --resolution accepted_risk
    --rationale "doc-only change"
    """
    with session(root) as svc:
        done = svc.obligation_resolve(
            obligation_id=obligation_id,
            # A word the user typed: the request model refuses anything but RESOLUTIONS.
            resolution=resolution,  # type: ignore[arg-type]
            rationale=rationale,
            receipt=receipt,
            successor_claim_id=successor,
        )
        text = _obligation_line(done)
        if done.review is not None:
            text = (
                f"review requested: {done.review.review_id} ({done.review.resolution} by "
                f"{done.review.requested_by}); obligation {done.obligation_id} stays open "
                "until a listed reviewer approves it: byte-probe obligations review "
                f"{done.review.review_id} --approve --rationale ..."
            )
        _emit(done, as_json, text)


@obligations_app.command("review")
def obligations_review_command(
    review_id: Annotated[
        str | None, typer.Argument(help="A review request to decide (omit to list).")
    ] = None,
    approve: Annotated[bool, typer.Option("--approve", help="Approve it.")] = False,
    reject: Annotated[bool, typer.Option("--reject", help="Reject it.")] = False,
    rationale: Annotated[str | None, typer.Option("--rationale", help="Why; kept forever.")] = None,
    scope: Annotated[str | None, typer.Option("--scope", help="Only this scope.")] = None,
    every: Annotated[bool, typer.Option("--all", help="List decided requests too.")] = False,
    as_json: JsonOpt = False,
    root: RootOpt = Path("."),
) -> None:
    """List pending review requests, or approve or reject one as the OS user running it
    (a reviewer the clearing rule lists, never the requester).

    Example: byte-probe obligations review rev_0123... --approve --rationale "checked the docs"
    """
    with session(root) as svc:
        if review_id is None:
            if approve or reject or rationale:
                raise UsageError("--approve, --reject and --rationale name a review id")
            found = svc.review_list(state=None if every else "pending", scope=scope).reviews
            _emit(found, as_json, "\n".join(_review_line(r) for r in found))
            return
        if approve == reject or not rationale:
            raise UsageError("review: give --approve or --reject, and --rationale")
        decided = svc.review_decide(
            review_id=review_id,
            decision="approve" if approve else "reject",
            rationale=rationale,
        )
        _emit(decided, as_json, _review_line(decided))


def _review_line(r: ReviewRequest) -> str:
    line = (
        f"{r.review_id} {r.state} {r.resolution} obligation={r.obligation_id} [{r.scope}] "
        f"requested by {r.requested_by} ({r.requested_kind}, {r.interface}): {r.rationale}"
    )
    if r.decided_by is not None:
        line += f"; {r.state} by {r.decided_by}: {r.decision_rationale}"
    return line


@knowledge_app.command("query")
def knowledge_query_command(
    snapshot: Annotated[str, typer.Option("--snapshot", help="Target snapshot id.")],
    scope: Annotated[str, typer.Option("--scope", help="Project key.")],
    text: Annotated[str | None, typer.Option("--text", help="Words to match.")] = None,
    path: Annotated[list[str] | None, typer.Option("--path", help="Related path.")] = None,
    limit: Annotated[int, typer.Option("--limit", help="Most hits.")] = 20,
    as_json: JsonOpt = False,
    root: RootOpt = Path("."),
) -> None:
    """Related claims with rechecked applicability; runs no code.

    Example: byte-probe knowledge query --scope payments --snapshot 3fa4... --text "trailing comma"
    """
    with session(root) as svc:
        hits = svc.knowledge_query(
            scope=scope, target_snapshot=snapshot, text=text, paths=tuple(path or ()), limit=limit
        ).hits
        _emit(
            hits,
            as_json,
            "\n".join(
                f"{h.claim.claim_id} {h.claim.outcome} {h.applicability.state}: {h.claim.statement}"
                for h in hits
            ),
        )


@knowledge_app.command("brief")
def knowledge_brief_command(
    snapshot: Annotated[str, typer.Option("--snapshot", help="Snapshot the turn works on.")],
    scope: Annotated[str, typer.Option("--scope", help="Project key.")],
    text: Annotated[str, typer.Option("--text", help="What the turn is about.")],
    as_json: JsonOpt = False,
    root: RootOpt = Path("."),
) -> None:
    """Before a turn: related claims with their applicability, and open obligations.

    Example: byte-probe knowledge brief --scope payments --snapshot 3fa4... --text "parser"
    """
    with session(root) as svc:
        brief = svc.knowledge_brief(snapshot_id=snapshot, scope=scope, text=text)
        lines = [
            f"{h.claim.claim_id} {h.claim.outcome} {h.applicability.state}: {h.claim.statement}"
            for h in brief.claims
        ]
        lines += [f"open: {_obligation_line(o)}" for o in brief.open_obligations]
        _emit(brief, as_json, "\n".join(lines))


@knowledge_app.command("record-answer")
def knowledge_record_answer_command(
    file: Annotated[str, typer.Argument(help="Answer JSON file, or - for stdin.")],
    as_json: JsonOpt = False,
    root: RootOpt = Path("."),
) -> None:
    """Store a model-authored answer as unresolved, with its boundary.

    Example: byte-probe knowledge record-answer answer.json --json
    """
    with session(root) as svc:
        record = svc.knowledge_record_answer(answer=read_json_arg(file, "answer", InvalidClaim))
        _emit(record, as_json, f"{record.claim_id} {record.outcome}")


_FINGERPRINT = re.compile(r"^[0-9a-f]{64}$")


def _accepted_key(item: str) -> str:
    # The table takes fingerprints or PEM text, never a path: the CLI reads key files.
    if _FINGERPRINT.fullmatch(item) or item.lstrip().startswith("-----BEGIN"):
        return item
    return read_public_key(Path(item))


class GateFormat(enum.StrEnum):
    """How ``gate`` prints its report."""

    text = "text"
    json = "json"
    markdown = "markdown"


def gate_command(
    snapshot: Annotated[
        str | None, typer.Option("--snapshot", help="Snapshot to gate on (or --base/--head).")
    ] = None,
    base: Annotated[
        str | None,
        typer.Option("--base", help="Git ref of the change's base (with --head)."),
    ] = None,
    head: Annotated[
        str | None,
        typer.Option(
            "--head", help="Git ref of the change's head: the one gated (alone: its tree)."
        ),
    ] = None,
    repo: RepoOpt | None = None,
    scope: ScopeOpt = None,
    allow_empty: AllowEmptyOpt = False,
    require_signed: Annotated[
        list[str] | None,
        typer.Option(
            "--require-signed",
            help="Public key file or fingerprint; receipt evidence must be signed by one of "
            "them (repeatable).",
        ),
    ] = None,
    fail_on_refuted: Annotated[
        bool,
        typer.Option(
            "--fail-on-refuted",
            help="Exit 1 on a live claim whose outcome is refuted (default: a warning).",
        ),
    ] = False,
    output: Annotated[
        GateFormat,
        typer.Option(
            "--format",
            help="text, json, or markdown (a CI job summary: >> $GITHUB_STEP_SUMMARY).",
        ),
    ] = GateFormat.text,
    junit: Annotated[
        Path | None,
        typer.Option("--junit", help="Also write the report as JUnit XML to this file."),
    ] = None,
    as_json: JsonOpt = False,
    root: RootOpt = Path("."),
) -> None:
    """Check every claim in scope (default: the whole store) on one snapshot; exit 1 while
    an obligation on that snapshot in scope is open, or (with --require-signed) while any
    receipt evidence is not signed by one of the given keys.

    Each open obligation is printed with its claim's statement and scope, its outcome,
    what moved (file digests, query matches, a symbol's consumers) and the exact
    `byte-probe recheck` command. Live claims whose outcome is refuted are a warning, and
    exit 1 with --fail-on-refuted. Exit 3, writing nothing, for a snapshot the store does
    not hold or a scope (or store) without a live claim, unless --allow-empty.

    With --base REF --head REF (a CI job's one command) both refs' trees are captured
    from git objects of --repo (no checkout), change analysis between them opens the
    obligations the change causes, and the head is gated: the same exit codes. With
    --head REF alone (a new branch: no base) its tree is captured and gated.
    --junit FILE writes the report as JUnit XML too (a CI test report).

    Example: byte-probe gate --snapshot 3fa4... --scope payments --format markdown

    Example: byte-probe gate --base origin/main --head HEAD --format markdown
    """
    keys = tuple(_accepted_key(item) for item in require_signed or [])
    if (snapshot is None) == (head is None) or (base is not None and head is None):
        raise InvalidInput("gate: give --snapshot, or --head (with or without --base)")
    shown: BaseModel
    change: ChangeAnalysis | None = None
    with session(root) as svc:
        if head is not None and base is None:
            snapshot = svc.snapshot_capture(root=str(repo or root), ref=head).snapshot_id
        if snapshot is not None:
            report = shown = svc.gate(
                snapshot_id=snapshot,
                scope=scope,
                allow_empty=allow_empty,
                require_signed=keys,
                fail_on_refuted=fail_on_refuted,
            )
        else:
            shown = gated = svc.gate_change(
                base=str(base),
                head=str(head),
                repository=str(repo or root),
                scope=scope,
                allow_empty=allow_empty,
                require_signed=keys,
                fail_on_refuted=fail_on_refuted,
            )
            report, change = gated.report, gated.change
    if junit is not None:
        _write_text(junit, render_gate_junit(report))
    if as_json or output is GateFormat.json:
        typer.echo(json.dumps(shown.model_dump(mode="json"), indent=2, sort_keys=True))
    elif output is GateFormat.markdown:
        typer.echo(render_gate_markdown(report), nl=False)
    else:
        if change is not None:
            typer.echo(_change_line(change))
        typer.echo(render_gate_text(report))
    if not report.passed:
        raise typer.Exit(EXIT_GATE_CLOSED)


def _write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all; OSFailure naming it."""
    partial = path.with_name(f".{path.name}.tmp")
    try:
        partial.write_text(text, encoding="utf-8")
        partial.replace(path)
    except OSError as exc:
        raise OSFailure(f"{path}: cannot write it ({exc})") from exc


def _change_line(change: ChangeAnalysis) -> str:
    """One line saying what the change between the two refs moved."""
    base, head = change.from_snapshot_id[:12], change.to_snapshot_id[:12]
    return (
        f"change {base}..{head}: {len(change.changed_paths)} changed path(s), "
        f"{change.candidates} candidate claim(s), {len(change.opened)} obligation(s) opened"
    )
