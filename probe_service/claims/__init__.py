"""Claims: typed claims with evidence and dependency baselines, applicability checks,
change analysis through a dependency index, obligations, supersession, tombstones,
an append-only audit log and knowledge search.

Every function here is a service operation shared by every interface; each takes the
``Store`` explicitly and an ``interface`` name for the audit log.
"""

from __future__ import annotations

from .analysis import change_analyze, changed_paths
from .audit import AuditEntry, read_audit
from .checking import claim_check
from .creation import claim_create, claim_supersede, knowledge_record_answer
from .gate import gate
from .lineage import claim_withdraw, supersession_chain
from .models import (
    AnswerRequest,
    ClaimRequest,
    Dependency,
    Evidence,
    GrepQuery,
    PathGlobQuery,
    PythonSymbolQuery,
    QuerySpec,
    SpanRef,
)
from .obligations import RESOLUTIONS, obligation_list, obligation_resolve
from .queries import ANALYZER_VERSION, evaluate_query
from .receipts import ReceiptLookup, no_receipts, store_receipts
from .records import (
    ChangeAnalysis,
    ClaimCheck,
    ClaimRecord,
    GateResult,
    KnowledgeHit,
    Obligation,
    QueryResult,
    Tombstone,
)
from .search import knowledge_query
from .service import claim_show
from .sources import SnapshotSource
from .views import TreeView

__all__ = [
    "ANALYZER_VERSION",
    "RESOLUTIONS",
    "AnswerRequest",
    "AuditEntry",
    "ChangeAnalysis",
    "ClaimCheck",
    "ClaimRecord",
    "ClaimRequest",
    "Dependency",
    "Evidence",
    "GateResult",
    "GrepQuery",
    "KnowledgeHit",
    "Obligation",
    "PathGlobQuery",
    "PythonSymbolQuery",
    "QueryResult",
    "QuerySpec",
    "ReceiptLookup",
    "SnapshotSource",
    "SpanRef",
    "Tombstone",
    "TreeView",
    "change_analyze",
    "changed_paths",
    "claim_check",
    "claim_create",
    "claim_show",
    "claim_supersede",
    "claim_withdraw",
    "evaluate_query",
    "gate",
    "knowledge_query",
    "knowledge_record_answer",
    "no_receipts",
    "obligation_list",
    "obligation_resolve",
    "read_audit",
    "store_receipts",
    "supersession_chain",
]
