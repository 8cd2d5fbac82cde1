"""The core claims flow against a real PostgreSQL server (fresh schema per test)."""

from __future__ import annotations

import pytest
from sqlalchemy import delete, update

from probe_service.claims import (
    LocalCaller,
    ReceiptLookup,
    change_analyze,
    claim_check,
    claim_create,
    claim_withdraw,
    gate,
    knowledge_query,
    obligation_list,
    obligation_resolve,
    store_receipts,
)
from probe_service.claims.tables import claim_audit, claims
from probe_service.errors import Conflict, EvidenceMismatch
from probe_service.principals import Actor, acting_as

from .helpers import PARSE_PY, WorkTree, claim_request, grep, stored_receipt

pytestmark = pytest.mark.postgres

#: A caller on the MCP face, whose label the audit log keeps.
MCP = LocalCaller(face="mcp")


def test_core_flow(pg_tree: WorkTree, receipts: ReceiptLookup) -> None:
    """Create, check, analyse twice, gate, resolve: the same rules as on SQLite."""
    store = pg_tree.store
    start = pg_tree.write("src/parse.py", PARSE_PY).capture()
    negative = {"negative_query": {"query": grep("legacy_parse")}}
    record = claim_create(
        store, claim_request(start, {"exact_blob": {"path": "src/parse.py"}}, negative),
        receipts=receipts,
    )  # fmt: skip
    added = pg_tree.write("src/new.py", "fine\n").capture()
    assert claim_check(store, [record.claim_id], added)[0].state == "current"
    end = pg_tree.write("src/parse.py", "changed\n").capture()
    first = change_analyze(store, added, end)
    assert [o.claim_id for o in first.opened] == [record.claim_id]
    assert change_analyze(store, added, end).opened == ()
    assert not gate(store, end, scope="payments").passed
    obligation_resolve(store, first.opened[0].obligation_id, "accepted_risk", "reviewed")
    assert obligation_list(store, state="open") == []
    assert gate(store, end, scope="payments").passed


def test_full_text_search_is_scoped_and_strict(pg_tree: WorkTree, receipts: ReceiptLookup) -> None:
    """to_tsvector search finds word forms, stays in scope and refuses weak matches."""
    store = pg_tree.store
    snap = pg_tree.write("src/parse.py", PARSE_PY).capture()
    claim_create(store, claim_request(snap), receipts=receipts)
    hits = knowledge_query(store, scope="payments", target_snapshot=snap,
                           text="accepting commas")  # fmt: skip
    assert len(hits) == 1
    assert hits[0].applicability.state == "current"
    assert knowledge_query(store, scope="other", target_snapshot=snap, text="comma") == []
    assert knowledge_query(store, scope="payments", target_snapshot=snap,
                           text="comma migration") == []  # fmt: skip


def test_tombstone_conflict(pg_tree: WorkTree, receipts: ReceiptLookup) -> None:
    """A withdrawn statement and boundary is flagged, not re-admitted."""
    store = pg_tree.store
    snap = pg_tree.write("src/parse.py", PARSE_PY).capture()
    record = claim_create(store, claim_request(snap), receipts=receipts)
    claim_withdraw(store, record.claim_id, "wrong")
    with pytest.raises(Conflict):
        claim_create(store, claim_request(snap), receipts=receipts)


def test_audit_and_claims_are_append_only(pg_tree: WorkTree, receipts: ReceiptLookup) -> None:
    """The PostgreSQL triggers refuse UPDATE and DELETE."""
    store = pg_tree.store
    snap = pg_tree.write("src/parse.py", PARSE_PY).capture()
    claim_create(store, claim_request(snap), receipts=receipts)
    for statement in (
        delete(claim_audit),
        update(claim_audit).values(operation="x"),
        update(claims).values(outcome="supported"),
    ):
        with pytest.raises(Conflict) as caught, store.transaction() as conn:
            conn.execute(statement)
        assert "append-only" in str(caught.value)


def test_trust_flow(pg_tree: WorkTree) -> None:
    """Bound evidence, agreeing rechecks, withdrawal and the one-snapshot gate on PostgreSQL."""
    store, lookup = pg_tree.store, store_receipts(pg_tree.store)
    start = pg_tree.write("src/parse.py", PARSE_PY).capture()
    first = stored_receipt(store, "supports", start, run_id="r1")
    record = claim_create(store, claim_request(start, evidence=[{"receipt": first}]),
                          receipts=lookup)  # fmt: skip
    end = pg_tree.write("src/parse.py", "changed\n").capture()
    (opened,) = change_analyze(store, start, end).opened
    refutes = stored_receipt(store, "refutes", end, run_id="r2")
    with pytest.raises(EvidenceMismatch):
        obligation_resolve(store, opened.obligation_id, "rechecked", "r", receipt=refutes,
                           receipts=lookup)  # fmt: skip
    agrees = stored_receipt(store, "supports", end, run_id="r3")
    with acting_as(Actor(name="bot", kind="agent", face="mcp")):
        done = obligation_resolve(store, opened.obligation_id, "rechecked", "r",
                                  receipt=agrees, receipts=lookup, caller=MCP)  # fmt: skip
    assert (done.interface, done.resolved_by) == ("mcp", "bot")
    assert gate(store, pg_tree.write("src/parse.py", "broken\n").capture()).passed is False
    assert gate(store, start).passed
    claim_withdraw(store, record.claim_id, "obsolete")
    assert obligation_list(store, state="open") == []
