"""``knowledge_query``: related claims of one scope by path and full-text match, each with
its applicability rechecked against a target snapshot. Nothing is executed.

Text matching is strict on purpose (docs/ARCHITECTURE.md, "Trust rules": an unknown
boundary differs from an empty
result): every significant word of the query must occur in the claim (SQLite FTS5 with the
porter tokenizer; PostgreSQL ``to_tsvector('english', ...) @@ plainto_tsquery``). A query
whose words do not all occur returns nothing rather than the least-bad match, and no query
ever reaches outside its scope.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from sqlalchemy import Connection, select
from sqlalchemy import text as sql_text

from ..errors import InvalidClaim
from ..store import Store
from .analysis import affected_claims
from .baselines import check_path
from .callers import PYTHON_CALLER, Caller, snapshots_for
from .checking import evaluate_claims, record_checks
from .records import KnowledgeHit
from .resolutions import close_current_again
from .rows import load_baselines, load_claims, load_heads
from .sources import SnapshotSource
from .tables import claim_evidence, claims

__all__ = ["MAX_HITS", "knowledge_query"]

MAX_HITS = 100
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "do",
        "does",
        "for",
        "from",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "so",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "this",
        "to",
        "was",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
    ]
)


def knowledge_query(
    store: Store,
    *,
    scope: str,
    target_snapshot: str,
    text: str | None = None,
    paths: Sequence[str] = (),
    limit: int = 20,
    caller: Caller = PYTHON_CALLER,
    source: SnapshotSource | None = None,
) -> list[KnowledgeHit]:
    """Live claims of ``scope`` related to ``text`` and/or ``paths``.

    Raises InvalidClaim when neither is given, a path is unsafe, or ``limit`` is out of range;
    NotFound (nothing recorded) when the store does not hold ``target_snapshot``.
    """
    if not text and not paths:
        raise InvalidClaim("query: give text and/or paths")
    if not 1 <= limit <= MAX_HITS:
        raise InvalidClaim(f"limit: {limit} is outside 1..{MAX_HITS}")
    clean = [check_path(p, "paths") for p in paths]
    source = source or snapshots_for(store, caller)
    source.require(target_snapshot, "target_snapshot")
    matched: dict[str, list[str]] = {}
    with store.reading() as conn:
        for claim_id in _text_matches(conn, scope, text or "", limit):
            matched.setdefault(claim_id, []).append("text")
        for path in clean:
            for claim_id in sorted(_path_matches(conn, scope, path)):
                matched.setdefault(claim_id, []).append(f"path:{path}")
        ids = list(matched)[:limit]
        records = load_claims(conn, ids)
        heads = load_heads(conn, ids)
        baselines = load_baselines(conn, ids)
    live = {
        i: h for i, h in heads.items() if not records[i].withdrawn and not records[i].superseded_by
    }
    checks = evaluate_claims(live, baselines, target_snapshot, source)
    with store.transaction() as conn:
        record_checks(conn, checks, caller.face)
        close_current_again(conn, checks, caller.face)
    return [
        KnowledgeHit(
            claim=records[c.claim_id], matched_by=tuple(matched[c.claim_id]), applicability=c
        )
        for c in checks
    ]


def fts_terms(query: str) -> list[str]:
    """The significant words of ``query`` (lower case, stop words removed, deduplicated)."""
    words = re.findall(r"\w+", query.lower())
    return list(dict.fromkeys(w for w in words if w not in _STOPWORDS))


def _text_matches(conn: Connection, scope: str, query: str, limit: int) -> list[str]:
    terms = fts_terms(query)[:32]
    if not terms:
        return []
    if conn.dialect.name == "postgresql":
        sql = sql_text(
            "SELECT claim_id FROM claims WHERE scope = :scope AND "
            "to_tsvector('english', coalesce(question, '') || ' ' || statement) "
            "@@ plainto_tsquery('english', :q) ORDER BY created_at DESC, claim_id LIMIT :n"
        )
        params = {"scope": scope, "q": " ".join(terms), "n": limit}
    else:
        sql = sql_text(
            "SELECT claim_id FROM claim_fts WHERE claim_fts MATCH :q AND scope = :scope "
            "ORDER BY rank, claim_id LIMIT :n"
        )
        quoted = " AND ".join('"' + t.replace('"', '""') + '"' for t in terms)
        params = {"scope": scope, "q": "body: (" + quoted + ")", "n": limit}
    return [row[0] for row in conn.execute(sql, params)]


def _path_matches(conn: Connection, scope: str, path: str) -> set[str]:
    found = affected_claims(conn, [path], scope)
    ev = claim_evidence.c
    query = (
        select(ev.claim_id)
        .join(claims, claims.c.claim_id == ev.claim_id)
        .where(ev.path == path, claims.c.scope == scope)
    )
    found.update(row[0] for row in conn.execute(query))
    return found
