"""Who may clear what, and the review queue (docs/ARCHITECTURE.md, "Principals and clearing").

``authorize`` applies the policy file's clearing rules to the actor of a resolution:
``rechecked`` is cleared by its evidence whoever brings it; an agent never accepts a risk;
in a scope with a rule, ``accepted_risk``, ``superseded`` and ``withdrawn`` are for the
users and kinds it lists, and a permission with reviewers makes the resolution a **review
request**. A listed reviewer other than the requester approves it (the resolution is then
recorded, as the requester's, in the same transaction) or rejects it; until then the
obligation stays open, so the gate treats a pending request as open. Requests and decisions
are insert-only rows; a request's one decision is its primary key.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, Literal

from sqlalchemy import Connection, select
from sqlalchemy.exc import IntegrityError

from ..errors import Conflict, InvalidClaim, NotFound, NotPermitted
from ..policies.clearing import CLEARED, ClearingRule, Permission, rule_for
from ..principals import Actor
from ..store import Store, utc_now
from .audit import append_audit
from .digests import digest_json
from .records import ReviewRequest, ReviewState
from .resolutions import MAX_LIST
from .tables import review_decisions, review_requests

__all__ = [
    "ReviewRequest",
    "authorize",
    "authorize_direct",
    "pending_review_of",
    "record_review_request",
    "review_decision_in",
    "review_list",
]


def authorize(
    rules: Sequence[ClearingRule], actor: Actor, scope: str, resolution: str
) -> Permission | None:
    """The permission that lets ``actor`` make ``resolution`` in ``scope`` (None: no rule
    governs it, resolve directly); raises NotPermitted naming the rule that refuses it."""
    if resolution == "rechecked":
        return None
    if resolution == "accepted_risk" and actor.kind == "agent":
        raise NotPermitted(
            f"resolution: {actor.describe()} may not accept a risk: agents never do; a person "
            "resolves it on the CLI (docs/ARCHITECTURE.md, 'Principals and clearing')"
        )
    rule = rule_for(rules, scope)
    if rule is None or resolution not in CLEARED:
        return None
    where = f"clearing rule {rule.scope!r}"
    permission = rule.permission(resolution)
    if permission is None:
        raise NotPermitted(f"resolution: {where} lets no one resolve as {resolution}")
    if not permission.allows(actor.name, actor.kind):
        raise NotPermitted(
            f"resolution: {where} does not let {actor.describe()} resolve as {resolution} "
            f"(users: {', '.join(permission.users) or 'none'}; kinds: "
            f"{', '.join(permission.kinds) or 'none'})"
        )
    return permission


def authorize_direct(
    rules: Sequence[ClearingRule], actor: Actor, scope: str, resolution: str, what: str
) -> None:
    """Refuse ``what`` (``claim_withdraw``, ``claim_supersede``: routes that close a
    claim's obligations without one) unless ``actor`` may make ``resolution`` in ``scope``
    directly; a rule that asks for review is only met through an obligation's request."""
    permission = authorize(rules, actor, scope, resolution)
    if permission is not None and permission.reviewers:
        raise NotPermitted(
            f"{what}: the clearing rule of scope {scope!r} sends {resolution} to review; "
            f"resolve one of the claim's open obligations as {resolution} to request it"
        )


def pending_review_of(conn: Connection, obligation_id: str) -> str | None:
    """The id of the obligation's pending review request, if it has one."""
    r, d = review_requests.c, review_decisions.c
    found = conn.execute(
        select(r.review_id)
        .join(review_decisions, d.review_id == r.review_id, isouter=True)
        .where(r.obligation_id == obligation_id, d.review_id.is_(None))
        .limit(1)
    ).scalar()
    return str(found) if found is not None else None


def record_review_request(
    conn: Connection,
    *,
    obligation_id: str,
    scope: str,
    resolution: str,
    rationale: str,
    successor_claim_id: str | None,
    actor: Actor,
) -> ReviewRequest:
    """Append a review request for an open obligation (one pending at a time)."""
    pending = pending_review_of(conn, obligation_id)
    if pending is not None:
        raise Conflict(f"obligation {obligation_id} already has a pending review ({pending})")
    row: dict[str, Any] = {
        "review_id": "rev_" + uuid.uuid4().hex,
        "obligation_id": obligation_id,
        "scope": scope,
        "resolution": resolution,
        "rationale": rationale,
        "successor_claim_id": successor_claim_id,
        "requested_by": actor.name,
        "requested_kind": actor.kind,
        "interface": actor.face,
        "requested_at": utc_now(),
    }
    conn.execute(review_requests.insert(), row)
    request = ReviewRequest(**row, state="pending")
    append_audit(
        conn,
        operation="review_request",
        interface=actor.face,
        scope=scope,
        subject_ids=[request.review_id, obligation_id],
        before=None,
        after=digest_json(request.model_dump(mode="json")),
    )
    return request


def _select() -> Any:
    r, d = review_requests.c, review_decisions.c
    return select(
        review_requests,
        d.decision,
        d.rationale.label("decision_rationale"),
        d.decided_by,
        d.decided_at,
    ).join(review_decisions, d.review_id == r.review_id, isouter=True)


def _from_row(row: Any) -> ReviewRequest:
    m = row._mapping
    state: ReviewState = {"approve": "approved", "reject": "rejected"}.get(
        m["decision"] or "", "pending"
    )  # type: ignore[assignment]
    return ReviewRequest(
        review_id=m["review_id"],
        obligation_id=m["obligation_id"],
        scope=m["scope"],
        resolution=m["resolution"],
        rationale=m["rationale"],
        successor_claim_id=m["successor_claim_id"],
        requested_by=m["requested_by"],
        requested_kind=m["requested_kind"],
        interface=m["interface"],
        requested_at=m["requested_at"],
        state=state,
        decided_by=m["decided_by"],
        decision_rationale=m["decision_rationale"],
        decided_at=m["decided_at"],
    )


def load_review(conn: Connection, review_id: str) -> ReviewRequest:
    """One review request; raises NotFound."""
    row = conn.execute(_select().where(review_requests.c.review_id == review_id)).first()
    if row is None:
        raise NotFound(f"review_id: no review request {review_id!r}")
    return _from_row(row)


def review_list(
    store: Store,
    *,
    state: ReviewState | None = "pending",
    scope: str | None = None,
    limit: int = 1000,
) -> list[ReviewRequest]:
    """Review requests, oldest first, by state (default pending) and scope."""
    if not 1 <= limit <= MAX_LIST:
        raise InvalidClaim(f"limit: {limit} is outside 1..{MAX_LIST}")
    d = review_decisions.c
    query = _select()
    if scope is not None:
        query = query.where(review_requests.c.scope == scope)
    if state == "pending":
        query = query.where(d.review_id.is_(None))
    elif state is not None:
        query = query.where(d.decision == ("approve" if state == "approved" else "reject"))
    query = query.order_by(review_requests.c.requested_at, review_requests.c.review_id)
    with store.reading() as conn:
        return [_from_row(row) for row in conn.execute(query.limit(limit))]


def review_decision_in(
    conn: Connection,
    request: ReviewRequest,
    decision: Literal["approve", "reject"],
    rationale: str,
    *,
    rules: Sequence[ClearingRule],
    actor: Actor,
) -> ReviewRequest:
    """Record ``actor``'s decision on a pending ``request`` inside the caller's
    transaction, after checking the clearing rule in force lists them as a reviewer and
    that they did not request it. Raises NotPermitted, Conflict (already decided)."""
    if request.state != "pending":
        raise Conflict(
            f"review {request.review_id} was already {request.state} by {request.decided_by}"
        )
    if not rationale.strip():
        raise InvalidClaim("rationale: a review decision keeps its rationale")
    rule = rule_for(rules, request.scope)
    permission = rule.permission(request.resolution) if rule else None
    where = f"clearing rule {rule.scope!r}" if rule else f"scope {request.scope!r}"
    if permission is None or not permission.reviewers:
        raise NotPermitted(
            f"review_id: {where} names no reviewer of {request.resolution} now; the request "
            "cannot be decided until the policy file lists one"
        )
    if actor.name == request.requested_by:
        raise NotPermitted(
            f"review_id: {actor.name} requested review {request.review_id}; a second "
            "person decides it (no self-review)"
        )
    if actor.kind != "person" or actor.name not in permission.reviewers:
        raise NotPermitted(
            f"review_id: {where} does not list {actor.describe()} as a reviewer of "
            f"{request.resolution} (reviewers: {', '.join(permission.reviewers)})"
        )
    try:
        conn.execute(
            review_decisions.insert(),
            {
                "review_id": request.review_id,
                "decision": decision,
                "rationale": rationale,
                "decided_by": actor.name,
                "interface": actor.face,
                "decided_at": utc_now(),
            },
        )
    except IntegrityError as exc:  # a concurrent decision won; the transaction rolls back
        raise Conflict(f"review {request.review_id} was decided meanwhile") from exc
    after = load_review(conn, request.review_id)
    append_audit(
        conn,
        operation="review_decide",
        interface=actor.face,
        scope=request.scope,
        subject_ids=[request.review_id, request.obligation_id],
        before=digest_json(request.model_dump(mode="json")),
        after=digest_json(after.model_dump(mode="json")),
    )
    return after
