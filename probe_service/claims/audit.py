"""The append-only audit log of every claims mutation, kept apart from events.

This module only appends and reads; nothing in the package updates or deletes audit rows,
and the ``0004_claims`` migration installs triggers that refuse UPDATE and DELETE.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy import Connection, Row, insert, select

from ..principals import current_actor
from ..store import utc_now
from .tables import claim_audit

__all__ = ["AuditEntry", "append_audit", "audit_entry", "read_audit"]


class AuditEntry(BaseModel):
    """One audited mutation."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    audit_id: int
    at: str
    operation: str
    interface: str
    scope: str
    subject_ids: tuple[str, ...]
    before_digest: str | None
    after_digest: str | None
    #: Who made the write (the OS user), and its kind; None for entries older than
    #: migration ``0015_principals``.
    actor: str | None = None
    actor_kind: str | None = None


def append_audit(
    conn: Connection,
    *,
    operation: str,
    interface: str,
    scope: str,
    subject_ids: Sequence[str],
    before: str | None,
    after: str | None,
) -> None:
    """Append one audit entry inside the caller's transaction, with the actor of the
    operation in progress (docs/ARCHITECTURE.md, "Principals and clearing")."""
    actor = current_actor()
    # One INSERT with its values as parameters: a ``.values(...)`` statement is a new
    # statement to key and look up on every call.
    conn.execute(
        insert(claim_audit),
        {
            "at": utc_now(),
            "operation": operation,
            "interface": interface,
            "scope": scope,
            "subject_ids": json.dumps(list(subject_ids)),
            "before_digest": before,
            "after_digest": after,
            "actor": actor.name,
            "actor_kind": actor.kind,
        },
    )


def read_audit(conn: Connection, scope: str | None = None) -> list[AuditEntry]:
    """Audit entries, oldest first, optionally for one scope."""
    query = select(claim_audit).order_by(claim_audit.c.audit_id)
    if scope is not None:
        query = query.where(claim_audit.c.scope == scope)
    return [audit_entry(row) for row in conn.execute(query)]


def audit_entry(row: Row[Any]) -> AuditEntry:
    """One ``claim_audit`` row as an entry."""
    return AuditEntry(
        audit_id=row.audit_id,
        at=row.at,
        operation=row.operation,
        interface=row.interface,
        scope=row.scope,
        subject_ids=tuple(json.loads(row.subject_ids)),
        before_digest=row.before_digest,
        after_digest=row.after_digest,
        actor=row.actor,
        actor_kind=row.actor_kind,
    )
