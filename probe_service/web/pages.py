"""The web view's pages: each one calls read-only rows of the operation table through the
view's one ``ProbeService`` session and renders the JSON they return.

No handler touches the store (docs/ARCHITECTURE.md, "Web view"), so a page shows exactly
what the host, the CLI or the Python API would return. Everything a probe, a repository or
a plan wrote is rendered as escaped text with control characters shown visibly
(``safe_text``); of a policy only ids and digests are shown.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.templating import Jinja2Templates

from ..errors import NotFound, ProbeServiceError
from ..safe_text import safe_line, safe_text
from ..service import ProbeService
from ..service.adapters import parse_receipt, phase_seconds
from .charts import column_chart, row_chart, waterfall

if TYPE_CHECKING:
    from ..service.adapters import CommittedConfirmation

__all__ = ["Pages"]

#: Characters of each output stream shown on a receipt page.
OUTPUT_CHARS = 64 * 1024
#: Committed fields shown with their value; every other one is shown by its digest only
#: (limits and environment come from the policy file: ids and digests only).
SHOWN_FIELDS = (
    "outcome",
    "reason",
    "status",
    "exit_code",
    "elapsed_us",
    "snapshot_id",
    "plan_id",
    "policy_id",
    "policy_digest",
    "action_key",
    "sandbox_digest",
    "settings_digest",
    "signer",
    "stdout_sha256",
    "stderr_sha256",
    "version",
)
#: The runs list's filters; every id among them takes a unique prefix (8+ hex), resolved
#: by the table's one id resolver like on every face (docs/ARCHITECTURE.md, "Ids").
RUN_FILTERS = ("run_id", "batch_id", "outcome", "reason", "policy_id", "snapshot_id", "state")


class Pages:
    """Route handlers over one session."""

    def __init__(self, svc: ProbeService, templates: Jinja2Templates) -> None:
        self.svc = svc
        self.templates = templates

    async def read(self, name: str, **params: Any) -> Any:
        """Call read-only operation ``name`` (JSON in, JSON out) off the event loop; the
        session's ``web`` face refuses any other (docs/ARCHITECTURE.md, "Web view")."""
        clean = {k: v for k, v in params.items() if v is not None}
        return await run_in_threadpool(self.svc.call, name, clean)

    def render(self, request: Request, template: str, status: int = 200, **ctx: Any) -> Response:
        """Render ``template`` with ``ctx``."""
        ctx["nav"] = template.split(".")[0]
        return self.templates.TemplateResponse(request, template, ctx, status_code=status)

    async def refused(self, request: Request, exc: Exception) -> Response:
        """The page for a refusal (the app's handler of ProbeServiceError): its code and
        message, as text, with the error class's HTTP status."""
        if not isinstance(exc, ProbeServiceError):  # registered for that class only
            raise exc
        return self.render(request, "error.html", exc.status, code=exc.code, message=safe_line(exc))

    async def farm(self, request: Request) -> Response:
        """Queue depth, states, throughput and latency charts, outcomes, reasons, workers."""
        hours = _number(request.query_params.get("hours"), 24.0)
        stats = await self.read("farm_stats", window_hours=hours, buckets=24)
        buckets = stats["buckets"]
        labels = [_clock(b["start_ms"]) for b in buckets]
        return self.render(
            request,
            "farm.html",
            stats=stats,
            hours=hours,
            states=row_chart(stats["by_state"], "runs by state"),
            outcomes=row_chart(stats["outcomes"], "outcomes in the window"),
            throughput=column_chart(
                [b["finished"] for b in buckets], labels, "runs finished per bucket"
            ),
            latency=column_chart(
                [b["latency_avg_ms"] for b in buckets],
                labels,
                "mean submit-to-receipt latency per bucket",
                unit=" ms",
            ),
        )

    async def runs(self, request: Request) -> Response:
        """The runs list with its filters and a cursor to the next page."""
        q = request.query_params
        filters = {k: q.get(k) or None for k in RUN_FILTERS}
        limit = _int(q.get("limit"), 50)
        page = await self.read("run_list", **filters, cursor=q.get("cursor") or None, limit=limit)
        next_query: dict[str, Any] = {k: v for k, v in filters.items() if v}
        if limit != 50:
            next_query["limit"] = limit
        if page["next_cursor"]:
            next_query["cursor"] = page["next_cursor"]
        return self.render(
            request,
            "runs.html",
            page=page,
            filters=filters,
            next_query=next_query if page["next_cursor"] else None,
            when=_clock,
            took=_took,
            line=safe_line,
        )

    async def batch(self, request: Request) -> Response:
        """A batch: progress, counts by state and outcome, its slowest runs, its failures."""
        report = await self.read(
            "batch_report",
            batch_id=request.path_params["batch_id"],
            limit=_int(request.query_params.get("limit"), 10),
        )
        total = report["total"] or 1
        return self.render(
            request,
            "batch.html",
            b=report,
            percent=round(100 * report["done"] / total),
            when=_clock,
            took=_took,
            line=safe_line,
        )

    async def receipt(self, request: Request) -> Response:
        """A receipt by its sha256 (or run id): the page of the run that wrote it."""
        found = await self.read("receipt_get", receipt_id=request.path_params["receipt_id"])
        run_id = found.get("operational", {}).get("run_id") or found["receipt_sha256"]
        return RedirectResponse(request.url_for("run", run_id=run_id).path, status_code=303)

    async def run(self, request: Request) -> Response:
        """A run and its receipt: inputs, commitments, timings, output, verification."""
        run_id = request.path_params["run_id"]
        try:  # a receipt's sha256 names no run row, but its receipt
            listed = await self.read("run_list", run_id=run_id, limit=1)
        except NotFound:
            listed = {"runs": []}
        entry = listed["runs"][0] if listed["runs"] else None
        receipt = None
        try:
            receipt = await self.read("receipt_get", receipt_id=run_id)
        except NotFound:
            if entry is None:
                raise
        if receipt is None and entry is not None and entry.get("receipt_sha256"):
            receipt = await self.read("receipt_get", receipt_id=entry["receipt_sha256"])
        context: dict[str, Any] = {"run_id": run_id, "entry": entry, "receipt": receipt}
        if receipt is not None:
            context.update(await self._receipt_context(receipt))
        return self.render(request, "run.html", **context)

    async def _receipt_context(self, document: dict[str, Any]) -> dict[str, Any]:
        """The receipt page's values, read from the typed receipt (``document`` is the
        ``receipt_get`` answer)."""
        receipt = parse_receipt(document)
        committed, operational = receipt.committed, receipt.operational
        try:
            verified = await self.read("receipt_verify", document=document)
            verification = {
                "ok": True,
                "text": f"commitment verifies: {verified['receipt_sha256']}",
            }
        except ProbeServiceError as exc:
            verification = {"ok": False, "text": safe_line(exc)}
        phases = phase_seconds(receipt)
        fields, kept = committed.to_json(), operational.to_json()
        junit = document.get("junit")  # receipt_get's summary: what `run` prints
        return {
            "junit": None if junit is None else _junit(junit),
            "receipt": receipt,
            "shown": [(k, fields[k]) for k in SHOWN_FIELDS if k in fields]
            + _confirmation_row(committed.confirmation),
            "digested": sorted(
                (k, v) for k, v in (receipt.field_digests or {}).items() if k not in SHOWN_FIELDS
            ),
            "executable": committed.executable,
            "hypothesis": safe_text(committed.plan.get("hypothesis", "")),
            "check": committed.check,
            "detail": safe_text(operational.detail or ""),
            "operational": {
                k: safe_line(kept[k])
                for k in ("worker", "started_at", "finished_at", "wall_seconds")
                if k in kept
            },
            "waterfall": waterfall(phases) if phases else None,
            "stdout": _output(operational.stdout_b64),
            "stderr": _output(operational.stderr_b64),
            "verification": verification,
        }

    async def plan(self, request: Request) -> Response:
        """A stored plan's canonical JSON."""
        stored = await self.read("probe_get", plan_id=request.path_params["plan_id"])
        text = json.dumps(stored["plan"], indent=2, sort_keys=True, ensure_ascii=False)
        return self.render(request, "plan.html", plan_id=stored["plan_id"], text=safe_text(text))

    async def snapshot(self, request: Request) -> Response:
        """A snapshot's file tree."""
        snap = await self.read("snapshot_get", snapshot_id=request.path_params["snapshot_id"])
        entries = [
            {**e, "depth": e["path"].count("/"), "name": safe_line(e["path"].rsplit("/", 1)[-1])}
            for e in snap["entries"]
        ]
        return self.render(request, "snapshot.html", snap=snap, entries=entries)

    async def snapshot_file(self, request: Request) -> Response:
        """One file of a snapshot, size-bounded."""
        found = await self.read(
            "snapshot_file",
            snapshot_id=request.path_params["snapshot_id"],
            entry=request.query_params.get("path", ""),
        )
        return self.render(
            request,
            "file.html",
            file=found,
            path=safe_line(found["path"]),
            text=None if found["text"] is None else safe_text(found["text"]),
            target=None if found["target"] is None else safe_line(found["target"]),
        )

    async def claims(self, request: Request) -> Response:
        """Open obligations grouped by scope and snapshot."""
        q = request.query_params
        found = await self.read(
            "obligation_list",
            state="open",
            scope=q.get("scope") or None,
            snapshot_id=q.get("snapshot_id") or None,
            limit=1000,
        )
        groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for item in found["obligations"]:
            groups.setdefault((item["scope"], item["snapshot_id"]), []).append(item)
        return self.render(
            request,
            "claims.html",
            groups=sorted(groups.items()),
            scope=q.get("scope") or "",
            snapshot_id=q.get("snapshot_id") or "",
        )

    async def turns(self, request: Request) -> Response:
        """Agent turns, newest first, with every dispatch decision (docs/ARCHITECTURE.md,
        "The agent's turn")."""
        found = await self.read("turn_list", limit=_int(request.query_params.get("limit"), 50))
        for turn in found["turns"]:
            # The tool name and root come from the agent's side: shown as inert text.
            turn["root"] = safe_line(turn["root"])
            for decision in turn["decisions"]:
                decision["tool"] = safe_line(decision["tool"])
        return self.render(request, "turns.html", turns=found["turns"])

    async def reviews(self, request: Request) -> Response:
        """Review requests, pending first unless ``?state=`` names another (or ``all``)."""
        state = request.query_params.get("state") or "pending"
        found = await self.read(
            "review_list",
            state=None if state == "all" else state,
            scope=request.query_params.get("scope") or None,
            limit=_int(request.query_params.get("limit"), 200),
        )
        for review in found["reviews"]:
            # A rationale is free text a person or an agent typed: shown as inert text.
            review["rationale"] = safe_line(review["rationale"])
            if review["decision_rationale"] is not None:
                review["decision_rationale"] = safe_line(review["decision_rationale"])
        return self.render(request, "reviews.html", reviews=found["reviews"])

    async def claim(self, request: Request) -> Response:
        """A claim with its dependencies and history."""
        history = await self.read("claim_history", claim_id=request.path_params["claim_id"])
        return self.render(request, "claim.html", h=history, claim=history["claim"])

    async def gate(self, request: Request) -> Response:
        """Whether a snapshot would pass the gate now (computed without writing). An unknown
        snapshot is a 404 and a scope without a live claim a 400 naming the scopes, unless
        ``?allow_empty=1``, as the gate itself answers."""
        preview = await self.read(
            "gate_preview",
            snapshot_id=request.path_params["snapshot_id"],
            scope=request.query_params.get("scope") or None,
            allow_empty=request.query_params.get("allow_empty") in ("1", "true", "yes"),
        )
        return self.render(request, "gate.html", g=preview)


def _junit(summary: dict[str, Any]) -> dict[str, Any]:
    """The JUnit summary of a receipt (``receipt_get``'s ``junit``, the one ``run`` and
    ``receipt show`` print), its test ids and messages made visible single lines."""
    cases = [
        {"id": safe_line(c["id"]), "outcome": c["outcome"], "message": safe_line(c["message"])}
        for c in summary.get("not_passed", ())
    ]
    not_passed = int(summary.get("failed", 0)) + int(summary.get("error", 0))
    return {**summary, "not_passed": cases, "unlisted": max(0, not_passed - len(cases))}


def _took(start_ms: int | None, end_ms: int | None) -> str:
    """A duration between two millisecond times, or — when either is missing."""
    if start_ms is None or end_ms is None:
        return "—"
    seconds = max(0, end_ms - start_ms) / 1000
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _output(encoded: object) -> dict[str, Any]:
    """A bounded, visible rendering of one base64 output stream."""
    if not isinstance(encoded, str) or not encoded:
        return {"text": "", "bytes": 0, "cut": False}
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        return {"text": "(not base64)", "bytes": 0, "cut": False}
    text = safe_text(data)
    return {"text": text[:OUTPUT_CHARS], "bytes": len(data), "cut": len(text) > OUTPUT_CHARS}


def _clock(ms: int | None) -> str:
    if ms is None:
        return "—"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%m-%d %H:%M:%S")


def _number(text: str | None, default: float) -> float:
    try:
        return float(text) if text else default
    except ValueError:
        return default


def _int(text: str | None, default: int) -> int:
    return int(text) if text and text.isdigit() and len(text) < 6 else default


def _confirmation_row(confirmation: CommittedConfirmation | None) -> list[tuple[str, str]]:
    """docs/ARCHITECTURE.md, "Confirming a refutation": whether a refutation was
    reproduced, where, and what the second execution decided; the digest row stays."""
    if confirmation is None:
        return []
    carried = confirmation.to_json()
    parts = [str(carried[k]) for k in ("state", "on", "outcome", "reason") if k in carried]
    return [("confirmation", safe_line(" · ".join(parts)))]
