"""The gate report for people: plain text for a terminal, Markdown for a CI job summary.

Both render the one ``GateReport`` (JSON is its dump), piece by piece: what a claim, a
repository or a probe wrote (statements, paths, match text, patterns) is hostile data
(docs/ARCHITECTURE.md, "Trust rules"), so every such piece goes through ``safe_line``
(controls shown visibly, one line) and, in Markdown, into a code span or escaped text —
never markup, a link, an HTML tag or a mention.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from ..safe_text import safe_line
from .gate_report import GateEntry, GateReport, RecheckHint, RefutedClaim
from .movement import AnalyzerMoved, FileMoved, MatchChange, Moved, QueryMoved
from .records import Obligation, QueryMatch

__all__ = ["render_gate_markdown", "render_gate_text"]

#: A piece of a line: (is code, text). Code is an id, a path, a digest, a query, a command.
_Piece = tuple[bool, str]
#: Hex shown of a digest in text and Markdown (JSON keeps the whole).
_SHORT = 12
#: Characters of a match's text shown.
_MATCH_CHARS = 80
_DIGEST = re.compile(r"\b(file|exec|sha256|ast):([0-9a-f]{16,64})\b")


def render_gate_text(report: GateReport) -> str:
    """The report as lines of plain text (the CLI's default output)."""
    lines = [_headline(report), _where(report)]
    for entry in report.entries:
        lines += ["", *_entry_text(entry)]
    lines += _others_text(report)
    if report.refuted:
        lines += ["", _refuted_headline(report)]
        lines += [f"  {_text(_refuted_pieces(c))}" for c in report.refuted]
    if report.recheck_command and len(report.entries) > 1:
        lines += ["", f"recheck every open obligation: {report.recheck_command}"]
    if report.moved_omitted:
        lines.append(f"(what moved is not listed for {report.moved_omitted} more obligation(s))")
    return "\n".join(lines)


def render_gate_markdown(report: GateReport) -> str:
    """The report as GitHub-flavoured Markdown (``--format markdown``, for a job summary)."""
    mark = "✅" if report.passed else "❌"
    lines = [f"## {mark} byte-probe gate {'passed' if report.passed else 'closed'}", ""]
    lines += [_md(_where_pieces(report)) + ": " + _md_text(_counts(report)), ""]
    for entry in report.entries:
        lines += _entry_markdown(entry)
    for label, group in _other_groups(report):
        lines += [f"**{label}**", ""]
        lines += [f"- {_md(_obligation_pieces(o))}" for o in group]
        lines.append("")
    for why in report.unsigned_evidence:
        lines.append(f"- not signed by a required key: {_md_text(why)}")
    if report.refuted:
        lines += ["> [!WARNING]", f"> {_md_text(_refuted_headline(report))}", ">"]
        lines += [f"> - {_md(_refuted_pieces(c))}" for c in report.refuted]
        lines.append("")
    if report.recheck_command and len(report.entries) > 1:
        lines += ["Recheck every open obligation:", "", *_md_command(report.recheck_command)]
    if report.moved_omitted:
        lines.append(f"_What moved is not listed for {report.moved_omitted} more obligation(s)._")
    return "\n".join(lines).rstrip() + "\n"


def _headline(report: GateReport) -> str:
    empty = " (--allow-empty: no live claim in scope)" if report.checked == 0 else ""
    state = "passed" if report.passed else "closed"
    return f"gate {state}: {_counts(report)}{empty}"


def _counts(report: GateReport) -> str:
    counts = f"{report.checked} claim(s) checked, {len(report.open_obligations)} open obligation(s)"
    if report.refuted:
        kind = "failing" if report.fail_on_refuted else "warning"
        counts += f", {len(report.refuted)} refuted claim(s) ({kind})"
    return counts


def _where(report: GateReport) -> str:
    scope = "the whole store (no --scope)" if report.whole_store else str(report.scope)
    return safe_line(f"snapshot {report.snapshot_id}, scope {scope}")


def _where_pieces(report: GateReport) -> list[_Piece]:
    scope: list[_Piece] = (
        [(False, "the whole store (no --scope)")]
        if report.whole_store
        else [(True, str(report.scope))]
    )
    return [(False, "Snapshot "), (True, report.snapshot_id), (False, ", scope "), *scope]


def _entry_text(entry: GateEntry) -> list[str]:
    lines = [
        f"{entry.obligation_id} open {entry.applicability}: {safe_line(entry.statement)}",
        f"  claim {entry.claim_id} [{safe_line(entry.scope)}] {entry.kind}, {entry.outcome}",
    ]
    for dep in entry.dependencies:
        head, details = _moved_pieces(dep.form, dep.position, dep.reason, dep.moved)
        lines.append(f"  moved: {_text(head)}")
        lines += [f"    {_text(d)}" for d in details]
    if not entry.dependencies:
        lines += [f"  reason: {safe_line(r)}" for r in entry.reasons]
    hint = entry.recheck
    lines += [f"  rests on: {safe_line(r)}" for r in hint.rests_on]
    if hint.disagreed:
        lines.append(f"  last recheck: {safe_line(hint.disagreed)}")
    lines.append(f"  next: {safe_line(_plain(hint) or hint.next)}")
    return lines


def _plain(hint: RecheckHint) -> str | None:
    """The recheck command when it is the whole next step, else None."""
    if hint.command is not None and hint.next == f"`{hint.command}`":
        return hint.command
    return None


def _entry_markdown(entry: GateEntry) -> list[str]:
    lines = [f"### {_md_code(entry.obligation_id)} {_md_text(entry.statement)}", ""]
    lines.append(
        f"- claim {_md_code(entry.claim_id)} ({_md_text(entry.kind)}, {entry.outcome}) "
        f"in scope {_md_code(entry.scope)}; {entry.applicability}"
    )
    if entry.dependencies:
        lines.append("- what moved:")
        for dep in entry.dependencies:
            head, details = _moved_pieces(dep.form, dep.position, dep.reason, dep.moved)
            lines.append(f"  - {_md(head)}")
            lines += [f"    - {_md(d)}" for d in details]
    else:
        lines += [f"- {_md_text(r)}" for r in entry.reasons]
    hint = entry.recheck
    if hint.rests_on:
        lines.append("- rests on:")
        lines += [f"  - {_md_text(r)}" for r in hint.rests_on]
    if hint.disagreed:
        lines.append(f"- last recheck: {_md_text(hint.disagreed)}")
    command = _plain(hint)
    lines.append("")
    lines += _md_command(command) if command else [f"Next: {_md_text(hint.next)}", ""]
    return lines


def _moved_pieces(
    form: str, position: int, reason: str, moved: Moved | None
) -> tuple[list[_Piece], list[list[_Piece]]]:
    """One dependency: its headline and detail lines."""
    where: _Piece = (False, f"dependencies[{position}] {form} ")
    if isinstance(moved, FileMoved):
        return [where, (True, moved.path), (False, ": "), *_arrow(moved.before, moved.after)], []
    if isinstance(moved, AnalyzerMoved):
        return [where, (False, "analyzer "), *_arrow(moved.before, moved.after)], []
    if isinstance(moved, QueryMoved):
        return _query_pieces(where, moved)
    return [where, (False, reason)], []


def _arrow(before: str | None, after: str | None) -> list[_Piece]:
    return [(True, _short(before or "absent")), (False, " → "), (True, _short(after or "absent"))]


def _query_pieces(where: _Piece, moved: QueryMoved) -> tuple[list[_Piece], list[list[_Piece]]]:
    if moved.after_count == moved.before_count:
        # The count alone would read "1 → 1": say what stayed, the details say what changed.
        counted = f": still {moved.before_count} match(es)"
    else:
        after = "?" if moved.after_count is None else str(moved.after_count)
        counted = f": {moved.before_count} → {after} match(es)"
    head: list[_Piece] = [where, (True, moved.query), (False, counted)]
    if moved.complete_after is False:
        head.append((False, ", incomplete now"))
    noun = "consumer" if moved.symbol else "match"
    details: list[list[_Piece]] = []
    details += [[(False, f"{noun} added "), *_match(m)] for m in moved.added]
    details += [[(False, f"{noun} removed "), *_match(m)] for m in moved.removed]
    details += [_changed(c) for c in moved.changed]
    if moved.omitted:
        details.append([(False, f"and {moved.omitted} more change(s)")])
    if moved.note:
        details.append([(False, moved.note)])
    return head, details


def _match(match: QueryMatch) -> list[_Piece]:
    place = f"{match.path}:{match.line}" if match.line else match.path
    pieces: list[_Piece] = [(True, place)]
    if match.role:
        pieces.append((False, f" {match.role}"))
    if match.text:
        pieces += [(False, " "), (True, _excerpt(match.text))]
    return pieces


def _changed(change: MatchChange) -> list[_Piece]:
    before, after = change.before, change.after
    place = f"{after.path}:{after.line}" if after.line else after.path
    role = f" {after.role}" if after.role else ""
    return [
        (False, "changed "),
        (True, place),
        (False, f"{role} "),
        (True, _excerpt(before.text) or "(empty)"),
        (False, " → "),
        (True, _excerpt(after.text) or "(empty)"),
    ]


def _excerpt(text: str) -> str:
    text = _short(text)
    return text if len(text) <= _MATCH_CHARS else text[:_MATCH_CHARS] + "…"


def _short(text: str) -> str:
    """Digests in ``text`` cut to ``_SHORT`` hex characters."""
    return _DIGEST.sub(lambda m: f"{m[1]}:{m[2][:_SHORT]}", text)


def _others_text(report: GateReport) -> list[str]:
    lines = []
    for label, group in _other_groups(report):
        lines += [f"{label}: {_text(_obligation_pieces(o))}" for o in group]
    lines += [f"not signed by a required key: {safe_line(why)}" for why in report.unsigned_evidence]
    return ["", *lines] if lines else []


def _other_groups(report: GateReport) -> Iterator[tuple[str, Sequence[Obligation]]]:
    if report.accepted_risk:
        yield "accepted risk (not checked)", report.accepted_risk
    if report.current_again:
        yield "current again", report.current_again


def _obligation_pieces(o: Obligation) -> list[_Piece]:
    pieces: list[_Piece] = [(True, o.obligation_id), (False, " claim "), (True, o.claim_id)]
    if o.resolution is not None:
        by = f" by {o.resolved_by}" if o.resolved_by else ""
        pieces.append((False, f" {o.resolution} via {o.interface or '?'}{by}: {o.rationale}"))
    return pieces


def _refuted_headline(report: GateReport) -> str:
    n = len(report.refuted)
    if report.fail_on_refuted:
        return f"{n} live claim(s) refuted: the gate fails on them (--fail-on-refuted)"
    return (
        f"warning: {n} live claim(s) refuted; the gate judges applicability and passes on "
        "them (--fail-on-refuted fails)"
    )


def _refuted_pieces(claim: RefutedClaim) -> list[_Piece]:
    pieces: list[_Piece] = [
        (True, claim.claim_id),
        (False, f" [{claim.scope}] refuted, {claim.applicability}: {claim.statement}"),
    ]
    for receipt in claim.receipts:
        pieces += [(False, " receipt "), (True, _short_id(receipt))]
    return pieces


def _short_id(value: str) -> str:
    return value[:_SHORT]


def _text(pieces: Sequence[_Piece]) -> str:
    return "".join(safe_line(text) for _, text in pieces)


def _md(pieces: Sequence[_Piece]) -> str:
    return "".join(_md_code(text) if code else _md_text(text) for code, text in pieces)


def _md_code(value: str) -> str:
    """A code span around ``value`` that nothing in it can close."""
    text = safe_line(value)
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


# Emphasis, code, links, strikethrough and table cells; a link needs "[", so "(" is safe.
_MD_ESCAPE = {c: "\\" + c for c in "\\`*_[]|~"}
_MD_ESCAPE.update({"<": "&lt;", ">": "&gt;", "&": "&amp;", "@": "&#64;"})


def _md_text(value: str) -> str:
    """``value`` as Markdown text that renders literally (no markup, link, tag or mention)."""
    return "".join(_MD_ESCAPE.get(c, c) for c in safe_line(value))


def _md_command(command: str) -> list[str]:
    """A fenced shell block holding ``command`` (a fence longer than any run inside)."""
    text = safe_line(command)
    fence = "`" * max(3, max((len(r) for r in re.findall(r"`+", text)), default=0) + 1)
    return [f"{fence}sh", text, fence, ""]
