"""How `run` and `receipt show` present one receipt: the outcome and why, safely.

Every value shown comes from a receipt, whose fields a probe, repository, plan or policy
may have chosen, so each goes through ``safe_text`` (docs/ARCHITECTURE.md, "Trust rules").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from probe_service.safe_text import excerpt, json_output, untrusted
from probe_service.service.adapters import (
    ConfirmationSummary,
    ReceiptSummary,
    kept_output,
    summarize_receipt,
)

from .tables import print_table

if TYPE_CHECKING:
    from probe_service.service.adapters import Receipt

__all__ = ["output_json", "print_receipt"]

_STREAMS = ("stdout", "stderr")


def output_json(receipt: Receipt) -> dict[str, Any]:
    """``stdout``/``stderr`` as text when valid UTF-8, else base64, with their encodings."""
    fields: dict[str, Any] = {}
    for stream in _STREAMS:
        value, encoding = json_output(kept_output(receipt, stream))
        fields[stream] = value
        fields[f"{stream}_encoding"] = encoding
    return fields


def _timings(summary: ReceiptSummary) -> str:
    parts = []
    if summary.elapsed_us is not None:
        parts.append(f"probe {summary.elapsed_us / 1_000_000:.3f}s")
    if summary.wall_seconds is not None:
        parts.append(f"sandbox wall {summary.wall_seconds:.3f}s")
    return ", ".join(parts)


def print_receipt(
    console: Console, receipt: Receipt, title: str, extra: dict[str, str] | None = None
) -> None:
    """Print the receipt's summary (the fields its JSON carries under the same names:
    outcome, reason, detail, the check, timings, phases, limits …) and both outputs'
    first/last lines."""
    summary = ReceiptSummary(**summarize_receipt(receipt))
    table = Table(title=untrusted(title), show_header=False)
    rows = _rows(summary)
    # Every detail the receipt has is shown (docs/ARCHITECTURE.md, "CLI output"): the
    # confirming execution's, after the confirmation's row (its JSON is the receipt's).
    at = next((i + 1 for i, (key, _) in enumerate(rows) if key == "confirmation"), len(rows))
    rows[at:at] = _confirmation_details(receipt)
    for key, value in rows + list((extra or {}).items()):
        table.add_row(key, untrusted("" if value is None else value))
    print_table(console, table)
    for stream in _STREAMS:
        _print_stream(console, stream, kept_output(receipt, stream))
    _print_failed_preflight(console, receipt)


def _rows(summary: ReceiptSummary) -> list[tuple[str, object]]:
    """The table's rows; each is a field (or a part of one) of ``summary``."""
    rows: list[tuple[str, object]] = [
        ("outcome", summary.outcome),
        ("reason", summary.reason),
        ("status", summary.status),
        ("exit_code", summary.exit_code),
    ]
    if summary.detail:
        rows.append(("detail", summary.detail))
    if summary.check is not None:
        held = "error" if summary.check.error else "passed" if summary.check.passed else "failed"
        rows.append(("check", f"{held}: {summary.check.detail}"))
    if timings := _timings(summary):
        rows.append(("timings", timings))
    if (memory := _memory(summary)) is not None:
        rows.append(("memory", memory))
    if summary.phases:
        rows.append(("phases", ", ".join(f"{p} {s:.3f}s" for p, s in summary.phases.items())))
    if summary.limits_applied:
        shown = {
            k: v for k, v in summary.limits_applied.items() if k != "enforced_by" and v is not None
        }
        rows.append(("limits_applied", ", ".join(f"{k} {v}" for k, v in shown.items())))
    rows += [("plan_id", summary.plan_id), ("snapshot_id", summary.snapshot_id)]
    rows += [("policy_id", summary.policy_id), ("receipt", summary.receipt_sha256)]
    return rows + _extra_rows(summary)


def _memory(summary: ReceiptSummary) -> str | None:
    """The probe's memory high-water mark beside the limit it ran under, in MiB, so a
    policy's ``memory_bytes`` can be sized from a run (docs/ARCHITECTURE.md, "Limits")."""
    peak = summary.memory_peak_bytes
    if peak is None:
        return None
    mib = 1024 * 1024
    limit = (summary.limits_applied or {}).get("memory_bytes")
    of = f" of its {limit / mib:.0f} MiB memory_bytes" if isinstance(limit, int) else ""
    return f"peak {peak / mib:.1f} MiB{of}"


def _print_failed_preflight(console: Console, receipt: Receipt) -> None:
    kept = receipt.operational.preflight_output or ()
    for i, command in enumerate(receipt.committed.preflight or ()):
        if command.status == "ok" and command.exit_code == 0:
            continue
        for stream in _STREAMS:
            data = kept_output(kept[i], stream) if i < len(kept) else b""
            _print_stream(console, f"preflight {i} {stream}", data)


def _extra_rows(summary: ReceiptSummary) -> list[tuple[str, object]]:
    """Rows for toolchains, preflight, JUnit counts, refusals and the sandbox-denial hint."""
    rows: list[tuple[str, object]] = [
        ("toolchain", f"{t.name} {t.sha256[:16]}") for t in summary.toolchains
    ]
    for command in summary.preflight:
        argv = " ".join(command.argv)
        rows.append(("preflight", f"{argv} -> {command.status}, exit {command.exit_code}"))
    junit = summary.junit
    if junit is not None:
        counts = ", ".join(
            f"{getattr(junit, k)} {k}" for k in ("passed", "failed", "error", "skipped")
        )
        rows.append(("junit", f"{junit.tests} tests: {counts}"))
        rows.extend(("  not passed", f"{c.id}: {c.message}") for c in junit.not_passed)
    if summary.confirmation is not None:
        rows.append(("confirmation", _confirmation_text(summary.confirmation)))
    for refusal in summary.refusals:
        # docs/ARCHITECTURE.md, "Trust rules": what made a failed check inconclusive.
        what = " ".join(part for part in (refusal.operation, refusal.target) if part)
        rows.append(("refused", f"{what}: {refusal.fix}"))
        if refusal.evidence:
            rows.append(("  evidence", refusal.evidence))
    if summary.possible_sandbox_denial:
        # docs/ARCHITECTURE.md, "Saying why": advice only, the outcome stands.
        paths = ", ".join(summary.possible_sandbox_denial)
        rows.append(("possible_sandbox_denial", f"outside the policy's grants: {paths}"))
    return rows


def _confirmation_details(receipt: Receipt) -> list[tuple[str, object]]:
    """The confirming execution's check detail and runner detail, when it has them."""
    check = receipt.committed.confirmation.check if receipt.committed.confirmation else None
    second = receipt.operational.confirmation
    rows: list[tuple[str, object]] = []
    if check is not None and check.detail:
        rows.append(("  check", check.detail))
    if second is not None and second.detail:
        rows.append(("  detail", second.detail))
    return rows


def _confirmation_text(confirmation: ConfirmationSummary) -> str:
    """docs/ARCHITECTURE.md, "Confirming a refutation": whether the refutation was
    reproduced, where, and what the second execution decided."""
    if confirmation.state == "unconfirmed":
        return "unconfirmed (the policy turns confirmation off)"
    where = str(confirmation.on or "").replace("_", " ")
    worker = f" {confirmation.worker}" if confirmation.worker else ""
    second = f"{confirmation.outcome} ({confirmation.reason})"
    return f"{confirmation.state} on the {where}{worker}: it decided {second}"


def _print_stream(console: Console, stream: str, data: bytes) -> None:
    if not data:
        console.print(Text(f"{stream}: (empty)", style="dim"))
        return
    cut = excerpt(data)
    header = f"{stream}: {cut.total_lines} line(s), {cut.total_bytes} bytes"
    console.print(Text(header + (f" ({cut.note})" if cut.note else ""), style="dim"))
    for line in cut.lines:
        console.print(Text("  " + line), soft_wrap=True)
