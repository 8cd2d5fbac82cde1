"""How `run` and `receipt show` present one receipt: the outcome and why, safely.

Every value shown comes from a receipt, whose fields a probe, repository, plan or policy
may have chosen, so each goes through ``safe_text`` (docs/ARCHITECTURE.md, "Trust rules").
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from probe_service.safe_text import excerpt, json_output, untrusted
from probe_service.service.adapters import kept_output, phase_seconds

__all__ = ["output_json", "print_receipt"]

_STREAMS = ("stdout", "stderr")


def output_json(receipt: dict[str, Any]) -> dict[str, Any]:
    """``stdout``/``stderr`` as text when valid UTF-8, else base64, with their encodings."""
    fields: dict[str, Any] = {}
    for stream in _STREAMS:
        value, encoding = json_output(kept_output(receipt, stream))
        fields[stream] = value
        fields[f"{stream}_encoding"] = encoding
    return fields


def _timings(committed: dict[str, Any], operational: dict[str, Any]) -> str:
    parts = []
    if isinstance(committed.get("elapsed_us"), int):
        parts.append(f"probe {committed['elapsed_us'] / 1_000_000:.3f}s")
    if isinstance(operational.get("wall_seconds"), int | float):
        parts.append(f"sandbox wall {operational['wall_seconds']:.3f}s")
    return ", ".join(parts)


def _phases(receipt: dict[str, Any]) -> str:
    # Only known phase names and non-negative numbers survive phase_seconds: a stored
    # receipt's operational part is not committed, so it is read as untrusted data.
    return ", ".join(f"{name} {value:.3f}s" for name, value in phase_seconds(receipt).items())


def print_receipt(
    console: Console, receipt: dict[str, Any], title: str, extra: dict[str, str] | None = None
) -> None:
    """Print outcome, reason, detail, exit code, timings and both outputs' first/last lines."""
    committed = receipt["committed"]
    operational = receipt.get("operational", {})
    table = Table(title=untrusted(title), show_header=False)
    rows: list[tuple[str, object]] = [
        ("outcome", committed.get("outcome")),
        ("reason", committed.get("reason")),
        ("status", committed.get("status")),
        ("exit_code", committed.get("exit_code")),
    ]
    if operational.get("detail"):
        rows.append(("detail", operational["detail"]))
    timings = _timings(committed, operational)
    if timings:
        rows.append(("timings", timings))
    phases = _phases(receipt)
    if phases:
        rows.append(("phases", phases))
    for key in ("plan_id", "snapshot_id", "policy_id"):
        rows.append((key, committed.get(key)))
    rows.append(("receipt", receipt.get("receipt_sha256")))
    rows.extend(_extra_rows(committed, operational))
    rows.extend((extra or {}).items())
    for key, value in rows:
        table.add_row(key, untrusted("" if value is None else value))
    console.print(table)
    for stream in _STREAMS:
        _print_stream(console, stream, kept_output(receipt, stream))
    _print_failed_preflight(console, committed, operational)


def _print_failed_preflight(
    console: Console, committed: dict[str, Any], operational: dict[str, Any]
) -> None:
    kept = operational.get("preflight_output") or []
    for i, command in enumerate(committed.get("preflight") or []):
        if command.get("status") == "ok" and command.get("exit_code") == 0:
            continue
        output = kept[i] if i < len(kept) and isinstance(kept[i], dict) else {}
        for stream in _STREAMS:
            data = kept_output({"operational": output}, stream)
            _print_stream(console, f"preflight {i} {stream}", data)


def _extra_rows(committed: dict[str, Any], operational: dict[str, Any]) -> list[tuple[str, object]]:
    """Rows for toolchains, preflight, JUnit counts, refusals and the sandbox-denial hint."""
    rows: list[tuple[str, object]] = []
    for toolchain in committed.get("toolchains") or []:
        rows.append(("toolchain", f"{toolchain.get('name')} {str(toolchain.get('sha256'))[:16]}"))
    for command in committed.get("preflight") or []:
        argv = " ".join(str(arg) for arg in command.get("argv") or [])
        rows.append(
            ("preflight", f"{argv} -> {command.get('status')}, exit {command.get('exit_code')}")
        )
    junit = committed.get("junit")
    if isinstance(junit, dict):
        counts = ", ".join(f"{junit.get(k)} {k}" for k in ("passed", "failed", "error", "skipped"))
        rows.append(("junit", f"{junit.get('tests')} tests: {counts}"))
        failing = [c for c in junit.get("cases") or [] if c.get("outcome") in ("failed", "error")]
        rows.extend(("  not passed", f"{c.get('id')}: {c.get('message')}") for c in failing[:20])
    for refusal in (committed.get("refusals") or [])[:20]:
        # docs/ARCHITECTURE.md, "Trust rules": what made a failed check inconclusive.
        if isinstance(refusal, dict):
            what = " ".join(str(refusal.get(k)) for k in ("operation", "target") if refusal.get(k))
            rows.append(("refused", f"{what}: {refusal.get('fix')}"))
    hint = operational.get("possible_sandbox_denial")
    if isinstance(hint, dict) and hint.get("paths"):
        # docs/ARCHITECTURE.md, "Saying why": advice only, the outcome stands.
        paths = ", ".join(str(p) for p in hint["paths"])
        rows.append(("possible_sandbox_denial", f"outside the policy's grants: {paths}"))
    return rows


def _print_stream(console: Console, stream: str, data: bytes) -> None:
    if not data:
        console.print(Text(f"{stream}: (empty)", style="dim"))
        return
    cut = excerpt(data)
    header = f"{stream}: {cut.total_lines} line(s), {cut.total_bytes} bytes"
    console.print(Text(header + (f" ({cut.note})" if cut.note else ""), style="dim"))
    for line in cut.lines:
        console.print(Text("  " + line), soft_wrap=True)
