"""Rows over claims: record, supersede, withdraw, check, search, obligations, the gate,
and the read-only history and gate preview of the web view."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Literal

from pydantic import Field, field_validator, model_validator

from ... import claims
from ...claims import history
from ...claims.models import AnswerRequest, ClaimRequest, parse_request
from ...claims.records import ClaimCheck, KnowledgeHit, Obligation
from ...policies import clearing_of
from ...policies.clearing import ClearingRule
from ..registry import ADMIN, AGENT, WEB, Request, operation
from ..session import ProbeService
from .common import (
    HEX64,
    ClaimId,
    Frozen,
    ObligationId,
    ReceiptSha256,
    ReviewId,
    SnapshotId,
)
from .snapshots import capture_refs

__all__ = ["GateOptions", "signature_check"]

_ALLOW_EMPTY = (
    "Accept a scope (or a store) that holds no live claim; otherwise it is refused, "
    "listing the scopes that exist."
)


#: The one wording of the optional ``scope`` of a request that names a claim.
_IN_SCOPE = "If given, the claim must belong to this scope (refused otherwise)."
_SCOPE_FILTER = "Only this scope (default: every scope)."
_LIMIT = "Most entries returned."


class ClaimCreateRequest(Request):
    claim: ClaimRequest = Field(
        description="The claim: scope, statement, kind, snapshot, evidence (receipt ids) and "
        "dependencies (what a change would invalidate)."
    )
    allow_tombstoned: bool = Field(False, description="Record over a tombstone, flagged.")
    allow_incomplete: bool = Field(False, description="Accept an incomplete negative query.")

    @field_validator("claim", mode="before")
    @classmethod
    def _parse(cls, value: object) -> ClaimRequest:
        return parse_request(ClaimRequest, value)


@operation("claim_create")
def claim_create(svc: ProbeService, req: ClaimCreateRequest) -> claims.ClaimRecord:
    """Record a typed claim with its evidence (receipt ids) and dependencies; the outcome
    follows the receipts and the baselines are computed from the snapshot, never accepted.
    Refuses evidence from another snapshot, an outcome the evidence does not carry, and
    a statement a withdrawn claim already made (unless allow_tombstoned)."""
    return claims.claim_create(
        svc.store,
        req.claim,
        receipts=svc.receipts,
        caller=svc.context,
        allow_tombstoned=req.allow_tombstoned,
        allow_incomplete=req.allow_incomplete,
    )


class ClaimSupersedeRequest(ClaimCreateRequest):
    predecessor_id: ClaimId
    rationale: str = Field(
        min_length=1, max_length=4000, description="Why the new claim replaces the old one."
    )


@operation("claim_supersede")
def claim_supersede(svc: ProbeService, req: ClaimSupersedeRequest) -> claims.ClaimRecord:
    """Record a new claim that replaces a live one, with the rationale kept."""
    return claims.claim_supersede(
        svc.store,
        req.predecessor_id,
        req.claim,
        rationale=req.rationale,
        receipts=svc.receipts,
        caller=svc.context,
        allow_tombstoned=req.allow_tombstoned,
        allow_incomplete=req.allow_incomplete,
        clearing=clearing_rules(svc),
    )


class ClaimWithdrawRequest(Request):
    claim_id: ClaimId
    rationale: str = Field(min_length=1, max_length=4000, description="Why it is withdrawn.")
    scope: str | None = Field(None, description=_IN_SCOPE)


@operation("claim_withdraw")
def claim_withdraw(svc: ProbeService, req: ClaimWithdrawRequest) -> claims.Tombstone:
    """Withdraw a claim, leaving a tombstone for its statement and boundary; its open
    obligations close as withdrawn with the same rationale."""
    return claims.claim_withdraw(
        svc.store,
        req.claim_id,
        req.rationale,
        scope=req.scope,
        caller=svc.context,
        clearing=clearing_rules(svc),
    )


class ClaimShowRequest(Request):
    claim_id: ClaimId
    scope: str | None = Field(None, description=_IN_SCOPE)


@operation("claim_show", faces=AGENT | WEB)
def claim_show(svc: ProbeService, req: ClaimShowRequest) -> claims.ClaimRecord:
    """Read one claim with its evidence, dependency baselines and links."""
    return claims.claim_show(svc.store, req.claim_id, scope=req.scope)


_REPOSITORY = (
    "The repository a ref is read from (its top level or a bare repository; default '.'); "
    "confined to the capture roots on the host and MCP faces like snapshot_capture's root."
)
_REF = "A git ref (branch, tag or commit id, with ~ or ^) whose tree is captured from git "
_REF += "objects first (no checkout); instead of the snapshot id."


def _one_of(snapshot_id: str | None, ref: str | None, field: str) -> None:
    if (snapshot_id is None) == (ref is None):
        raise ValueError(f"give exactly one of {field}_snapshot and {field}_ref")


class ClaimCheckRequest(Request):
    claim_ids: tuple[ClaimId, ...] = Field(
        min_length=1, max_length=1000, description="Claim ids (or unique prefixes) to recheck."
    )
    target_snapshot: SnapshotId | None = Field(
        None, description="The snapshot rechecked against (or give target_ref)."
    )
    target_ref: str | None = Field(None, min_length=1, max_length=256, description=_REF)
    repository: str = Field(".", min_length=1, description=_REPOSITORY)
    scope: str | None = Field(None, description="If given, every claim must belong to it.")

    @model_validator(mode="after")
    def _target(self) -> ClaimCheckRequest:
        _one_of(self.target_snapshot, self.target_ref, "target")
        return self


class ClaimChecks(Frozen):
    checks: list[ClaimCheck]


@operation("claim_check")
def claim_check(svc: ProbeService, req: ClaimCheckRequest) -> ClaimChecks:
    """Recheck named claims against a target snapshot without executing code: each is
    current, needs_recheck or unknown, with the dependencies that moved. With target_ref
    the ref's tree is captured from git objects first. Refuses a snapshot the store does
    not hold, a ref that does not exist or names a blob, and a scope no claim belongs
    to."""
    (target,) = _snapshots_of(svc, req.repository, [(req.target_snapshot, req.target_ref)])
    checks = claims.claim_check(
        svc.store,
        list(req.claim_ids),
        target,
        scope=req.scope,
        caller=svc.context,
    )
    return ClaimChecks(checks=checks)


class KnowledgeRecordAnswerRequest(Request):
    answer: AnswerRequest = Field(
        description="The question, the answer, the snapshot and what the answer rests on."
    )
    allow_tombstoned: bool = Field(False, description="Record over a tombstone, flagged.")

    @field_validator("answer", mode="before")
    @classmethod
    def _parse(cls, value: object) -> AnswerRequest:
        return parse_request(AnswerRequest, value, "answer")


@operation("knowledge_record_answer")
def knowledge_record_answer(
    svc: ProbeService, req: KnowledgeRecordAnswerRequest
) -> claims.ClaimRecord:
    """Store an agent's interpretation of a question with its validity boundary (the
    spans and dependencies it rests on), so a later change reopens it."""
    return claims.knowledge_record_answer(
        svc.store, req.answer, caller=svc.context, allow_tombstoned=req.allow_tombstoned
    )


class KnowledgeQueryRequest(Request):
    scope: str = Field(min_length=1, max_length=200, description="The scope searched.")
    target_snapshot: SnapshotId
    text: str | None = Field(
        None, max_length=4000, description="Words the claims should relate to."
    )
    paths: tuple[str, ...] = Field(
        (), max_length=200, description="Snapshot paths the claims should depend on."
    )
    limit: int = Field(20, ge=1, le=200, description=_LIMIT)


class KnowledgeHits(Frozen):
    hits: list[KnowledgeHit]


@operation("knowledge_query")
def knowledge_query(svc: ProbeService, req: KnowledgeQueryRequest) -> KnowledgeHits:
    """Find live claims of a scope related to text and/or paths and recheck their
    applicability on the target snapshot, without executing code."""
    hits = claims.knowledge_query(
        svc.store,
        scope=req.scope,
        target_snapshot=req.target_snapshot,
        text=req.text,
        paths=req.paths,
        limit=req.limit,
        caller=svc.context,
    )
    return KnowledgeHits(hits=hits)


class KnowledgeBriefRequest(Request):
    snapshot_id: SnapshotId
    scope: str = Field(min_length=1, max_length=200, description="The scope of the task.")
    text: str = Field(min_length=1, max_length=4000, description="The task, in words.")
    limit: int = Field(20, ge=1, le=200, description=_LIMIT)


@operation("knowledge_brief")
def knowledge_brief(svc: ProbeService, req: KnowledgeBriefRequest) -> claims.KnowledgeBrief:
    """Before a turn: the claims related to a task with their applicability on a
    snapshot, and every open obligation of the scope."""
    return claims.knowledge_brief(
        svc.store, req.snapshot_id, req.scope, req.text, limit=req.limit, caller=svc.context
    )


class ChangeAnalyzeRequest(Request):
    from_snapshot: SnapshotId | None = Field(
        None, description="The snapshot before the change (or give from_ref)."
    )
    to_snapshot: SnapshotId | None = Field(
        None, description="The snapshot after the change (or give to_ref)."
    )
    from_ref: str | None = Field(None, min_length=1, max_length=256, description=_REF)
    to_ref: str | None = Field(None, min_length=1, max_length=256, description=_REF)
    repository: str = Field(".", min_length=1, description=_REPOSITORY)
    scope: str | None = Field(None, description=_SCOPE_FILTER)
    allow_empty: bool = Field(False, description=_ALLOW_EMPTY)

    @model_validator(mode="after")
    def _sides(self) -> ChangeAnalyzeRequest:
        _one_of(self.from_snapshot, self.from_ref, "from")
        _one_of(self.to_snapshot, self.to_ref, "to")
        return self


def _snapshots_of(
    svc: ProbeService, repository: str, sides: list[tuple[str | None, str | None]]
) -> list[str]:
    """Each side's ``(snapshot id, ref)`` as a snapshot id: the refs' trees captured from
    git objects of ``repository``, all resolved before any is captured."""
    refs = [ref for snapshot_id, ref in sides if snapshot_id is None and ref is not None]
    captured = iter(capture_refs(svc, repository, refs) if refs else [])
    return [snapshot_id if snapshot_id is not None else next(captured) for snapshot_id, _ in sides]


@operation("change_analyze")
def change_analyze(svc: ProbeService, req: ChangeAnalyzeRequest) -> claims.ChangeAnalysis:
    """Compare two snapshots and open scoped obligations for the claims whose
    dependencies changed or became unknown; nothing is executed. Refuses a snapshot the
    store does not hold, and a scope (or store) without a live claim unless allow_empty.
    With from_ref / to_ref the refs' trees are captured from git objects first (a ref
    that does not exist or names a blob is refused before anything is written)."""
    before, after = _snapshots_of(
        svc, req.repository, [(req.from_snapshot, req.from_ref), (req.to_snapshot, req.to_ref)]
    )
    return claims.change_analyze(
        svc.store,
        before,
        after,
        scope=req.scope,
        caller=svc.context,
        allow_empty=req.allow_empty,
    )


class ObligationListRequest(Request):
    scope: str | None = Field(None, description=_SCOPE_FILTER)
    state: Literal["open", "resolved"] | None = Field(None, description="Only this state.")
    claim_id: ClaimId | None = Field(None, description="Only this claim's (id or prefix).")
    snapshot_id: SnapshotId | None = Field(
        None, description="Only those opened for this snapshot (id or prefix)."
    )
    limit: int = Field(1000, ge=1, le=10_000, description=_LIMIT)


class Obligations(Frozen):
    obligations: list[Obligation]


@operation("obligation_list", faces=AGENT | WEB)
def obligation_list(svc: ProbeService, req: ObligationListRequest) -> Obligations:
    """List obligations (decisions or rechecks a change opened), filtered by scope,
    state, claim or snapshot."""
    found = claims.obligation_list(
        svc.store,
        scope=req.scope,
        state=req.state,
        claim_id=req.claim_id,
        snapshot_id=req.snapshot_id,
        limit=req.limit,
    )
    return Obligations(obligations=found)


class ObligationResolveRequest(Request):
    obligation_id: ObligationId
    resolution: Literal["rechecked", "accepted_risk", "superseded", "withdrawn"] = Field(
        description="rechecked (with a receipt that reran the claim's plan on the "
        "obligation's snapshot and agrees), accepted_risk, superseded (with a successor "
        "claim) or withdrawn."
    )
    rationale: str = Field(min_length=1, max_length=4000, description="Why, kept with it.")
    receipt: ReceiptSha256 | None = Field(
        None, description="For rechecked: the rerun's receipt sha256 (or a unique prefix)."
    )
    successor_claim_id: ClaimId | None = Field(
        None, description="For superseded: the claim that replaces it (id or prefix)."
    )
    scope: str | None = Field(None, description="If given, the obligation must belong to it.")


def clearing_rules(svc: ProbeService) -> tuple[ClearingRule, ...]:
    """The clearing rules of the session's policy file (none without a file)."""
    return clearing_of(svc.policy_file)[0]


@operation("obligation_resolve")
def obligation_resolve(svc: ProbeService, req: ObligationResolveRequest) -> claims.Resolved:
    """Resolve an open obligation with a retained rationale: rechecked (a receipt that
    ran the claim's plan on the obligation's snapshot and agrees), superseded (a successor
    claim) or withdrawn. Refuses evidence from another plan or snapshot. Who resolves is
    the caller's operating-system identity, never a field; the policy file's clearing
    rules may refuse it (not_permitted) or turn it into a review request a second person
    decides on the CLI (the answer's review; the obligation stays open until then).
    An agent never accepts a risk: on the MCP and host faces accepted_risk is refused."""
    return claims.obligation_resolve(
        svc.store,
        req.obligation_id,
        req.resolution,
        req.rationale,
        receipt=req.receipt,
        successor_claim_id=req.successor_claim_id,
        receipts=svc.receipts,
        scope=req.scope,
        caller=svc.context,
        clearing=clearing_rules(svc),
    )


class ReviewListRequest(Request):
    state: Literal["pending", "approved", "rejected"] | None = Field(
        "pending", description="Only this state (default pending; null: every state)."
    )
    scope: str | None = Field(None, description=_SCOPE_FILTER)
    limit: int = Field(1000, ge=1, le=10_000, description=_LIMIT)


class Reviews(Frozen):
    reviews: list[claims.ReviewRequest]


@operation("review_list", faces=AGENT | WEB)
def review_list(svc: ProbeService, req: ReviewListRequest) -> Reviews:
    """List review requests: resolutions a clearing rule sent to a second person, with who
    requested them and, once decided, who approved or rejected them. The gate counts an
    obligation with a pending request as open."""
    found = claims.review_list(svc.store, state=req.state, scope=req.scope, limit=req.limit)
    return Reviews(reviews=found)


class ReviewDecideRequest(Request):
    review_id: ReviewId
    decision: Literal["approve", "reject"]
    rationale: str = Field(min_length=1, max_length=4000, description="Why, kept with it.")


@operation("review_decide", faces=ADMIN)
def review_decide(svc: ProbeService, req: ReviewDecideRequest) -> claims.ReviewRequest:
    """Approve or reject a pending review request as the calling person, who must be a
    reviewer the clearing rule lists and not the requester; an approval records the
    requested resolution in the same transaction. CLI and Python only: no agent face
    offers it."""
    return claims.review_decide(
        svc.store,
        req.review_id,
        req.decision,
        req.rationale,
        clearing=clearing_rules(svc),
        caller=svc.context,
    )


class GateOptions(Request):
    """What every gate takes beside what it gates (``gate``, ``gate_change``)."""

    scope: str | None = Field(None, description="The scope gated (default: the whole store).")
    allow_empty: bool = Field(False, description=_ALLOW_EMPTY)
    require_signed: tuple[str, ...] = Field(
        (),
        max_length=16,
        description="Accept only receipts signed by one of these keys: 64-hex fingerprints "
        "or PEM Ed25519 public keys (a PEM key also verifies the signature).",
    )
    fail_on_refuted: bool = Field(
        False, description="Fail on a live claim whose outcome is refuted (else a warning)."
    )

    @field_validator("require_signed")
    @classmethod
    def _keys(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        # Never a path: a machine face must not make the service read a file it names.
        for i, item in enumerate(value):
            if not (re.fullmatch(HEX64, item) or item.lstrip().startswith("-----BEGIN")):
                raise ValueError(f"item {i} is neither a 64-hex fingerprint nor a PEM key")
        return value


class GateRequest(GateOptions):
    snapshot_id: SnapshotId


def signature_check(svc: ProbeService, keys: tuple[str, ...]) -> Callable[[str], str | None] | None:
    """The gate's receipt-signature requirement for ``keys`` (None without keys)."""
    if not keys:
        return None
    from ...plans.signature_check import signature_requirement

    # The session's policy file: its revocations, not another file's.
    return signature_requirement(svc.store, keys, svc.policy_file)


@operation("gate")
def gate(svc: ProbeService, req: GateRequest) -> claims.GateReport:
    """Recheck every live claim of a scope against one snapshot and say whether the
    snapshot passes: no open obligation, no claim that is not current (and, with
    require_signed, every receipt signed by a required key). Each open obligation comes
    with its claim's statement, what moved and the exact recheck command; live claims
    whose outcome is refuted are a warning (a failure with fail_on_refuted). Refuses,
    writing nothing, a snapshot the store does not hold (not_found) and a scope (or store)
    without a live claim (invalid_input, listing the scopes that have one) unless
    allow_empty."""
    return claims.gate(
        svc.store,
        req.snapshot_id,
        scope=req.scope,
        caller=svc.context,
        require_signed=signature_check(svc, req.require_signed),
        allow_empty=req.allow_empty,
        fail_on_refuted=req.fail_on_refuted,
    )


class ClaimHistoryRequest(Request):
    claim_id: ClaimId
    scope: str | None = Field(None, max_length=200, description=_IN_SCOPE)
    limit: int = Field(200, ge=1, le=1000, description=_LIMIT)


@operation("claim_history", faces=AGENT | WEB)
def claim_history(svc: ProbeService, req: ClaimHistoryRequest) -> history.ClaimHistory:
    """One claim's history: recorded checks, obligations with resolutions and rationale,
    the supersession chain, a tombstone, and the audit entries naming it. Read-only;
    refuses an id that is not stored."""
    return history.claim_history(svc.store, req.claim_id, scope=req.scope, limit=req.limit)


class GatePreviewRequest(Request):
    snapshot_id: SnapshotId
    scope: str | None = Field(
        None, max_length=200, description="The scope gated (default: the whole store)."
    )
    allow_empty: bool = Field(False, description=_ALLOW_EMPTY)


@operation("gate_preview", faces=AGENT | WEB)
def gate_preview(svc: ProbeService, req: GatePreviewRequest) -> history.GatePreview:
    """Whether the gate would pass a snapshot now (every live claim current, no open
    obligation on it), computed without opening, closing or recording anything. Refuses
    what the gate refuses (an unknown snapshot; a scope without a live claim unless
    allow_empty)."""
    return history.gate_preview(
        svc.store,
        req.snapshot_id,
        scope=req.scope,
        allow_empty=req.allow_empty,
        caller=svc.context,
    )
