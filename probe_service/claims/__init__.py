"""Claims: typed claims with evidence and dependency baselines, applicability checks,
change analysis through a dependency index, obligations, supersession, tombstones,
an append-only audit log and knowledge search.

Every function here is a service operation shared by every interface; each takes the
``Store`` explicitly and its ``caller`` (``callers.py``: the face label for the audit log
and the TypeScript boundary analyzer, a session's ``CallContext``). Decisions worth knowing:

- Outcome (``supported``/``refuted``/``unresolved``) is fixed at creation from receipts
  read through a ``ReceiptLookup``; applicability (``current``/``needs_recheck``/
  ``unknown``) lives in ``claim_checks`` and obligations. No claim row is ever updated
  (a trigger refuses it), and ``claim_audit`` refuses UPDATE and DELETE.
- Tombstones: re-recording a withdrawn claim's statement with the same boundary (same
  scope, normalized statement, same named dependencies) raises ``Conflict``; the explicit
  ``allow_tombstoned=True`` override records it with ``flagged="tombstone"``.
- Scope: listing and searching operations are confined to the scope they name and never
  fall back to another; id-addressed operations accept ``scope`` and then refuse ids of
  other scopes with NotFound (with ``scope=None`` the id alone addresses the claim).
- Events: ``claim_created``, ``claim_superseded``, ``claim_withdrawn``, ``obligation_opened``
  and ``obligation_resolved`` per subject; ``claim_applicability`` for each check that is not
  ``current`` (unless an ``obligation_opened`` event for it already carries the state).
- ``change_analyze`` rechecks only claims reached through the dependency index from the
  paths that differ between the two snapshots; withdrawn and superseded claims are skipped.
  Use ``gate`` (every live claim of a scope) for a full recheck against one snapshot.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .analysis import change_analyze, changed_paths
    from .audit import AuditEntry, read_audit
    from .brief import KnowledgeBrief, knowledge_brief
    from .callers import PYTHON_CALLER, Caller, LocalCaller
    from .checking import claim_check
    from .creation import (
        build_answer,
        claim_create,
        claim_supersede,
        knowledge_record_answer,
        write_answer,
    )
    from .gate_report import GateReport
    from .gating import gate
    from .lineage import claim_withdraw, supersession_chain
    from .models import (
        AnswerRequest,
        ClaimRequest,
        ContentGlobQuery,
        Dependency,
        Evidence,
        GrepQuery,
        PathGlobQuery,
        PythonSymbolQuery,
        QuerySpec,
        SpanRef,
    )
    from .obligations import RESOLUTIONS, obligation_list, obligation_resolve, review_decide
    from .queries import ANALYZER_VERSION, evaluate_query
    from .receipts import ReceiptLookup, no_receipts, store_receipts
    from .recheck import batches_under_way, obligation_recheck, queued_run_ids
    from .recheck_records import RecheckReport
    from .records import (
        ChangeAnalysis,
        ClaimCheck,
        ClaimRecord,
        KnowledgeHit,
        Obligation,
        QueryResult,
        Resolved,
        ReviewRequest,
        Tombstone,
    )
    from .reviews import review_list
    from .scopes import require_some_live_claim
    from .search import knowledge_query
    from .service import claim_show
    from .settle import recheck_batch_of_run, settle_recheck
    from .sources import SnapshotSource
    from .views import BoundaryAnalyzer, TreeView

__all__ = [
    "ANALYZER_VERSION",
    "PYTHON_CALLER",
    "RESOLUTIONS",
    "AnswerRequest",
    "AuditEntry",
    "BoundaryAnalyzer",
    "Caller",
    "ChangeAnalysis",
    "ClaimCheck",
    "ClaimRecord",
    "ClaimRequest",
    "ContentGlobQuery",
    "Dependency",
    "Evidence",
    "GateReport",
    "GrepQuery",
    "KnowledgeBrief",
    "KnowledgeHit",
    "LocalCaller",
    "Obligation",
    "PathGlobQuery",
    "PythonSymbolQuery",
    "QueryResult",
    "QuerySpec",
    "ReceiptLookup",
    "RecheckReport",
    "Resolved",
    "ReviewRequest",
    "SnapshotSource",
    "SpanRef",
    "Tombstone",
    "TreeView",
    "batches_under_way",
    "build_answer",
    "change_analyze",
    "changed_paths",
    "claim_check",
    "claim_create",
    "claim_show",
    "claim_supersede",
    "claim_withdraw",
    "evaluate_query",
    "gate",
    "knowledge_brief",
    "knowledge_query",
    "knowledge_record_answer",
    "no_receipts",
    "obligation_list",
    "obligation_recheck",
    "obligation_resolve",
    "queued_run_ids",
    "read_audit",
    "recheck_batch_of_run",
    "require_some_live_claim",
    "review_decide",
    "review_list",
    "settle_recheck",
    "store_receipts",
    "supersession_chain",
    "write_answer",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__)
