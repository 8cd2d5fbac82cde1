"""Reading and writing claim rows: claims, evidence, baselines and the dependency index."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from pydantic import TypeAdapter
from sqlalchemy import Connection, Row, insert, select, text

from ..errors import NotFound
from .globs import compile_glob
from .records import Baseline, ClaimRecord, EvidenceRecord, ExactBlobBaseline
from .tables import (
    claim_dep_domains,
    claim_dep_paths,
    claim_dependencies,
    claim_evidence,
    claim_supersessions,
    claim_tombstones,
    claims,
)

__all__ = [
    "chunks",
    "insert_claim",
    "load_baselines",
    "load_claim",
    "load_claims",
    "load_heads",
    "reasons_json",
]

_BASELINE: TypeAdapter[Baseline] = TypeAdapter(Baseline)
#: Keeps IN (...) lists under every backend's bound-parameter limit.
CHUNK = 500


def chunks(items: Sequence[str], size: int = CHUNK) -> Iterator[Sequence[str]]:
    """Split ``items`` into slices of at most ``size``."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def insert_claim(conn: Connection, record: ClaimRecord) -> None:
    """Insert a claim with its evidence, baselines, index rows and full-text entry."""
    head = record.model_dump(
        include={
            "claim_id",
            "scope",
            "origin",
            "kind",
            "statement",
            "question",
            "outcome",
            "snapshot_id",
            "boundary_key",
            "record_digest",
            "flagged",
            "created_at",
        }
    )
    conn.execute(insert(claims).values(**head))
    if record.evidence:
        conn.execute(insert(claim_evidence), list(_evidence_rows(record)))
    conn.execute(
        insert(claim_dependencies),
        [
            {
                "claim_id": record.claim_id,
                "position": i,
                "form": b.form,
                "baseline": b.model_dump_json(),
            }
            for i, b in enumerate(record.dependencies)
        ],
    )
    _insert_index(conn, record)
    if conn.dialect.name == "sqlite":
        conn.execute(
            text("INSERT INTO claim_fts (claim_id, scope, body) VALUES (:c, :s, :b)"),
            {"c": record.claim_id, "s": record.scope, "b": _fts_body(record)},
        )


def _fts_body(record: ClaimRecord) -> str:
    return f"{record.question or ''} {record.statement}"


def _evidence_rows(record: ClaimRecord) -> Iterator[dict[str, Any]]:
    for i, ev in enumerate(record.evidence):
        row = ev.model_dump(exclude={"start", "end", "plan"})
        yield {
            **row,
            "plan_id": ev.plan,
            "claim_id": record.claim_id,
            "position": i,
            "span_start": ev.start,
            "span_end": ev.end,
        }


def _insert_index(conn: Connection, record: ClaimRecord) -> None:
    paths: set[str] = set()
    domains: set[tuple[str, str]] = set()
    for baseline in record.dependencies:
        if isinstance(baseline, ExactBlobBaseline):
            paths.add(baseline.path)
        else:
            glob = baseline.query.domain
            domains.add((compile_glob(glob).prefix, glob))
            if baseline.query.kind == "typescript_boundary":
                # Its identifier query set covers every TS/JS file of a snapshot, inside
                # the domain or not (docs/ARCHITECTURE.md, "TypeScript boundary").
                domains.add(("", "**"))
    base = {"claim_id": record.claim_id, "scope": record.scope}
    if paths:
        conn.execute(insert(claim_dep_paths), [{**base, "path": p} for p in sorted(paths)])
    if domains:
        conn.execute(
            insert(claim_dep_domains),
            [{**base, "prefix": pre, "glob": g} for pre, g in sorted(domains)],
        )


def load_claim(conn: Connection, claim_id: str, scope: str | None = None) -> ClaimRecord:
    """Load one claim; raise NotFound when it does not exist (in ``scope``, if given)."""
    found = load_claims(conn, [claim_id])
    record = found.get(claim_id)
    if record is None or (scope is not None and record.scope != scope):
        raise NotFound(
            f"claim_id: no claim {claim_id!r}" + (f" in scope {scope!r}" if scope else "")
        )
    return record


def load_claims(conn: Connection, claim_ids: Sequence[str]) -> dict[str, ClaimRecord]:
    """Load the claims that exist among ``claim_ids``, keyed by id."""
    out: dict[str, ClaimRecord] = {}
    for part in chunks(list(dict.fromkeys(claim_ids))):
        heads = conn.execute(select(claims).where(claims.c.claim_id.in_(part))).all()
        if not heads:
            continue
        ids = [h.claim_id for h in heads]
        evidence = _group(
            conn.execute(
                select(claim_evidence)
                .where(claim_evidence.c.claim_id.in_(ids))
                .order_by(claim_evidence.c.claim_id, claim_evidence.c.position)
            )
        )
        baselines = load_baselines(conn, ids)
        links = _links(conn, ids)
        for head in heads:
            out[head.claim_id] = _record(head, evidence, baselines, links)
    return out


def load_baselines(conn: Connection, claim_ids: Sequence[str]) -> dict[str, list[Baseline]]:
    """Baselines of each claim, in dependency order."""
    result: dict[str, list[Baseline]] = {}
    for part in chunks(list(claim_ids)):
        rows = conn.execute(
            select(claim_dependencies.c.claim_id, claim_dependencies.c.baseline)
            .where(claim_dependencies.c.claim_id.in_(part))
            .order_by(claim_dependencies.c.claim_id, claim_dependencies.c.position)
        )
        for claim_id, raw in rows:
            result.setdefault(claim_id, []).append(_BASELINE.validate_json(raw))
    return result


def _group(rows: Iterable[Row[Any]]) -> dict[str, list[EvidenceRecord]]:
    grouped: dict[str, list[EvidenceRecord]] = {}
    for row in rows:
        grouped.setdefault(row.claim_id, []).append(
            EvidenceRecord(
                kind=row.kind,
                receipt=row.receipt,
                receipt_outcome=row.receipt_outcome,
                receipt_signer=row.receipt_signer,
                path=row.path,
                start=row.span_start,
                end=row.span_end,
                sha256=row.sha256,
                text=row.text,
                plan=row.plan_id,
            )
        )
    return grouped


def _links(conn: Connection, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    links: dict[str, dict[str, Any]] = {i: {} for i in ids}
    sup = claim_supersessions.c
    for pred, succ in conn.execute(
        select(sup.predecessor_id, sup.successor_id).where(
            sup.predecessor_id.in_(ids) | sup.successor_id.in_(ids)
        )
    ):
        if pred in links:
            links[pred]["superseded_by"] = succ
        if succ in links:
            links[succ]["supersedes"] = pred
    tomb = claim_tombstones.c
    for (claim_id,) in conn.execute(select(tomb.claim_id).where(tomb.claim_id.in_(ids))):
        links[claim_id]["withdrawn"] = True
    return links


def _record(
    head: Row[Any],
    evidence: dict[str, list[EvidenceRecord]],
    baselines: dict[str, list[Baseline]],
    links: dict[str, dict[str, Any]],
) -> ClaimRecord:
    return ClaimRecord(
        claim_id=head.claim_id,
        scope=head.scope,
        statement=head.statement,
        kind=head.kind,
        origin=head.origin,
        question=head.question,
        outcome=head.outcome,
        snapshot_id=head.snapshot_id,
        boundary_key=head.boundary_key,
        record_digest=head.record_digest,
        created_at=head.created_at,
        flagged=head.flagged,
        evidence=tuple(evidence.get(head.claim_id, ())),
        dependencies=tuple(baselines.get(head.claim_id, ())),
        **links.get(head.claim_id, {}),
    )


def reasons_json(reasons: Sequence[str]) -> str:
    """Reasons as stored in text columns."""
    return json.dumps(list(reasons))


def load_heads(conn: Connection, claim_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
    """``{claim_id: (scope, outcome)}`` for the claims that exist among ``claim_ids``."""
    out: dict[str, tuple[str, str]] = {}
    for part in chunks(list(dict.fromkeys(claim_ids))):
        rows = conn.execute(
            select(claims.c.claim_id, claims.c.scope, claims.c.outcome).where(
                claims.c.claim_id.in_(part)
            )
        )
        out.update({cid: (scope, outcome) for cid, scope, outcome in rows})
    return out
