"""The rows of the operation table, one module per part (docs/ARCHITECTURE.md, "The
operation table" and "Start-up").

Each handler's docstring is the description a model reads when it picks a tool, so it says
what the operation does, what it never does, and what it refuses. Handlers only translate a
request into calls on the parts' functions; rules live in the parts. A row is the one
place its operation is defined: no second tier of service functions.

``INDEX`` names every operation, in the table's order, with the module that defines it, so
that calling one operation imports that module and the parts it uses, never the whole
table. ``operation`` refuses a row that is missing here or listed under another module.
"""

from __future__ import annotations

__all__ = ["INDEX"]

INDEX: dict[str, str] = {
    "capabilities": "meta",
    "snapshot_capture": "snapshots",
    "snapshot_get": "snapshots",
    "snapshot_materialize": "snapshots",
    "probe_plan": "plans",
    "probe_get": "plans",
    "probe_run": "plans",
    "run_status": "plans",
    "probe_submit": "runs",
    "batch_status": "runs",
    "run_cancel": "runs",
    "receipt_get": "receipts",
    "receipt_export": "receipts",
    "receipt_verify": "receipts",
    "policy_list": "admin",
    "policy_describe": "admin",
    "policy_check": "admin",
    "toolchain_create": "admin",
    "toolchain_digest": "admin",
    "claim_create": "claims",
    "claim_supersede": "claims",
    "claim_withdraw": "claims",
    "claim_show": "claims",
    "claim_check": "claims",
    "knowledge_record_answer": "claims",
    "knowledge_query": "claims",
    "knowledge_brief": "claims",
    "change_analyze": "claims",
    "obligation_list": "claims",
    "obligation_resolve": "claims",
    "review_list": "claims",
    "review_decide": "claims",
    "obligation_recheck": "rechecks",
    "gate": "claims",
    "knowledge_events": "events",
    "typescript_boundary": "typescript",
    "id_resolve": "ids",
    "key_create": "admin",
    "batch_submit": "runs",
    "batch_resume": "runs",
    "batch_wait": "runs",
    "run_list": "runs",
    "farm_stats": "runs",
    "batch_report": "runs",
    "claim_history": "claims",
    "gate_preview": "claims",
    "snapshot_file": "snapshots",
    "bundle_export": "bundles",
    "bundle_verify": "bundles",
    "bundle_import": "bundles",
    "gate_change": "gates",
    "turn_begin": "turns",
    "turn_end": "turns",
    "dispatch_check": "turns",
    "turn_list": "turns",
    "turn_current": "turns",
    "lease_renew": "turns",
    "lease_release": "turns",
    "store_gc": "gc",
}
