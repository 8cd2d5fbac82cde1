"""Output models: query results, baselines, checks, claims, obligations."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from .models import QuerySpec

__all__ = [
    "Applicability",
    "Baseline",
    "ChangeAnalysis",
    "ClaimCheck",
    "ClaimRecord",
    "DependencyCheck",
    "EvidenceRecord",
    "ExactBlobBaseline",
    "IdentifierSet",
    "KnowledgeHit",
    "Obligation",
    "QueryBaseline",
    "QueryMatch",
    "QueryResult",
    "Resolved",
    "ReviewRequest",
    "Tombstone",
]

Applicability = Literal["current", "needs_recheck", "unknown"]
Outcome = Literal["supported", "refuted", "unresolved"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class QueryMatch(_Frozen):
    """One match: a path, and for content queries a position, role and line text."""

    path: str
    line: int = 0
    column: int = 0
    role: str = ""
    text: str = ""


class IdentifierSet(_Frozen):
    """A ``typescript_boundary`` dependency's conservative identifier query set: the
    symbol's name and every alias name the worker found, with how often each occurs in
    the TS/JS files the worker does not analyze (docs/ARCHITECTURE.md, "TypeScript
    boundary")."""

    names: tuple[str, ...]
    #: Fingerprint (paths and digests) of the TS/JS files outside the worker's domain.
    outside_digest: str
    #: (path, name, count) for every name occurring in one of those files.
    occurrences: tuple[tuple[str, str, int], ...] = ()


class QueryResult(_Frozen):
    """A bounded, deterministic query result with the domain it was evaluated over."""

    kind: str
    analyzer_version: str
    matches: tuple[QueryMatch, ...]
    complete: bool
    truncated: bool
    notes: tuple[str, ...]
    members: int
    membership_digest: str
    content_digest: str
    result_digest: str
    bytes_scanned: int
    #: For ``typescript_boundary``: adapter and compiler versions, identities and the
    #: worker's domain/resolution fingerprints (docs/ARCHITECTURE.md, "TypeScript boundary").
    boundary: dict[str, str] | None = None
    #: For ``typescript_boundary``: the identifier query set.
    identifiers: IdentifierSet | None = None


class ExactBlobBaseline(_Frozen):
    """``path`` must keep ``fingerprint`` (``None`` means: must stay absent)."""

    form: Literal["exact_blob"] = "exact_blob"
    path: str
    fingerprint: str | None
    #: Baselines stored before the executable bit counted have no version: ``exact_blob/1``.
    analyzer_version: str = "exact_blob/1"


class QueryBaseline(_Frozen):
    """A query result captured at the claim's snapshot (``query_set`` or ``negative_query``)."""

    form: Literal["query_set", "negative_query"]
    query: QuerySpec
    analyzer_version: str
    members: int
    membership_digest: str
    content_digest: str
    result_digest: str
    match_count: int
    complete: bool
    truncated: bool
    #: For ``typescript_boundary``: the consumer locations, the worker's fingerprints and
    #: the identifier query set.
    matches: tuple[QueryMatch, ...] | None = None
    boundary: dict[str, str] | None = None
    identifiers: IdentifierSet | None = None

    @model_serializer(mode="wrap")
    def _omit_absent_boundary(self, handler: SerializerFunctionWrapHandler) -> Any:
        # Baselines of other kinds serialize exactly as before these fields existed, so
        # their stored JSON and claim record digests do not change.
        data = handler(self)
        if isinstance(data, dict):
            for key in ("matches", "boundary", "identifiers"):
                if data.get(key) is None:
                    data.pop(key, None)
        return data


Baseline = Annotated[ExactBlobBaseline | QueryBaseline, Field(discriminator="form")]


class EvidenceRecord(_Frozen):
    """Stored evidence; span hashes and receipt outcomes were computed by the service."""

    kind: Literal["receipt", "span", "text", "plan"]
    receipt: str | None = None
    #: For ``plan`` evidence: the declared plan's id.
    plan: str | None = None
    receipt_outcome: str | None = None
    #: For ``receipt`` evidence: the signer's fingerprint or ``unsigned`` (committed in the
    #: receipt itself, so left out of the claim's record digest).
    receipt_signer: str | None = None
    path: str | None = None
    start: int | None = None
    end: int | None = None
    sha256: str | None = None
    text: str | None = None


class ClaimRecord(_Frozen):
    """A stored claim; ``outcome`` never changes after it is recorded."""

    claim_id: str
    scope: str
    statement: str
    kind: str
    origin: Literal["claim", "answer"]
    question: str | None
    outcome: Outcome
    snapshot_id: str
    boundary_key: str
    record_digest: str
    created_at: str
    evidence: tuple[EvidenceRecord, ...]
    dependencies: tuple[Baseline, ...]
    flagged: str | None = None
    supersedes: str | None = None
    superseded_by: str | None = None
    withdrawn: bool = False


class DependencyCheck(_Frozen):
    """Applicability of one dependency against a target snapshot."""

    position: int
    form: str
    state: Applicability
    reason: str


class ClaimCheck(_Frozen):
    """Applicability of a claim against a target snapshot; the outcome is only echoed."""

    claim_id: str
    scope: str
    snapshot_id: str
    outcome: Outcome
    state: Applicability
    reasons: tuple[str, ...]
    dependencies: tuple[DependencyCheck, ...]


class Obligation(_Frozen):
    """A scoped recheck obligation for one claim at one target snapshot."""

    obligation_id: str
    claim_id: str
    scope: str
    snapshot_id: str
    from_snapshot_id: str | None
    state: Literal["open", "resolved"]
    applicability: Applicability
    reasons: tuple[str, ...]
    opened_at: str
    resolution: str | None = None
    rationale: str | None = None
    receipt: str | None = None
    #: For ``rechecked``: the fingerprint that signed its receipt, or ``unsigned``.
    receipt_signer: str | None = None
    successor_claim_id: str | None = None
    resolved_at: str | None = None
    #: Which interface resolved it, and who (``byte-probe`` for automatic resolutions).
    interface: str | None = None
    resolved_by: str | None = None


ReviewState = Literal["pending", "approved", "rejected"]


class ReviewRequest(_Frozen):
    """A resolution waiting for, or decided by, a second party."""

    review_id: str
    obligation_id: str
    scope: str
    resolution: str
    rationale: str
    successor_claim_id: str | None
    requested_by: str
    requested_kind: str
    interface: str
    requested_at: str
    state: ReviewState
    decided_by: str | None = None
    decision_rationale: str | None = None
    decided_at: str | None = None


class Resolved(Obligation):
    """What ``obligation_resolve`` answers: the obligation after it, and the review
    request it became when a clearing rule asks a second person (the obligation is then
    still open)."""

    review: ReviewRequest | None = None


class Tombstone(_Frozen):
    """What a withdrawn claim leaves behind."""

    claim_id: str
    scope: str
    boundary_key: str
    rationale: str
    withdrawn_at: str


class ChangeAnalysis(_Frozen):
    """What ``change_analyze`` found between two snapshots."""

    from_snapshot_id: str
    to_snapshot_id: str
    changed_paths: tuple[str, ...]
    candidates: int
    checks: tuple[ClaimCheck, ...]
    opened: tuple[Obligation, ...]


class KnowledgeHit(_Frozen):
    """A related claim with its applicability rechecked against the target snapshot."""

    claim: ClaimRecord
    matched_by: tuple[str, ...]
    applicability: ClaimCheck
