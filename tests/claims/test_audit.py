"""The audit log: every mutation appended; no code path or SQL updates or deletes it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from sqlalchemy import delete, text, update

import probe_service.claims as claims_pkg
from probe_service.claims import (
    ReceiptLookup,
    change_analyze,
    claim_create,
    claim_withdraw,
    obligation_resolve,
    read_audit,
)
from probe_service.claims.tables import claim_audit, claims
from probe_service.errors import Conflict
from probe_service.store import Store

from .helpers import PARSE_PY, WorkTree, claim_request


@pytest.fixture
def history(tree: WorkTree, receipts: ReceiptLookup) -> Store:
    start = tree.write("src/parse.py", PARSE_PY).capture()
    record = claim_create(tree.store, claim_request(start), receipts=receipts, interface="mcp")
    end = tree.write("src/parse.py", "changed\n").capture()
    opened = change_analyze(tree.store, start, end).opened[0]
    obligation_resolve(tree.store, opened.obligation_id, "accepted_risk", "fine")
    claim_withdraw(tree.store, record.claim_id, "gone")
    return tree.store


def test_every_mutation_is_audited_in_order(history: Store) -> None:
    """Create, check, open, analyse, resolve and withdraw each leave an entry."""
    with history.reading() as conn:
        entries = read_audit(conn, "payments")
    operations = [e.operation for e in entries]
    assert operations == [
        "claim_create",
        "claim_check",
        "obligation_open",
        "change_analyze",
        "obligation_resolve",
        "claim_withdraw",
    ]
    assert entries[0].interface == "mcp" and entries[0].after_digest
    assert entries[4].before_digest != entries[4].after_digest


def test_update_of_the_audit_table_is_refused(history: Store) -> None:
    """The migration's trigger refuses UPDATE."""
    with pytest.raises(Conflict), history.transaction() as conn:
        conn.execute(update(claim_audit).values(operation="forged"))


def test_delete_from_the_audit_table_is_refused(history: Store) -> None:
    """The migration's trigger refuses DELETE."""
    with pytest.raises(Conflict), history.transaction() as conn:
        conn.execute(delete(claim_audit))


def test_claim_rows_cannot_be_updated(history: Store) -> None:
    """A recorded outcome cannot be edited, even with SQL."""
    with pytest.raises(Conflict), history.transaction() as conn:
        conn.execute(update(claims).values(outcome="supported"))


def test_no_module_updates_or_deletes_any_claims_table() -> None:
    """No module imports SQLAlchemy's update/delete or carries UPDATE/DELETE SQL."""
    package = Path(claims_pkg.__file__).parent
    sql = re.compile(r"\bUPDATE\s+\w+\s+SET\b|\bDELETE\s+FROM\b|\bTRUNCATE\b", re.IGNORECASE)
    offenders = []
    for module in sorted(package.glob("*.py")):
        tree = ast.parse(module.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sqlalchemy"):
                names = {alias.name for alias in node.names}
                offenders += [f"{module.name}: imports {n}" for n in names & {"update", "delete"}]
            if isinstance(node, ast.Attribute) and node.attr in ("update", "delete"):
                if isinstance(node.value, ast.Name) and node.value.id in ("sa", "sqlalchemy"):
                    offenders.append(f"{module.name}:{node.lineno} sa.{node.attr}")
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if sql.search(node.value):
                    offenders.append(f"{module.name}:{node.lineno} SQL")
    assert offenders == []


def test_audit_module_exposes_only_append_and_read() -> None:
    """The audit module's public surface is append and read."""
    from probe_service.claims import audit

    assert set(audit.__all__) == {"AuditEntry", "append_audit", "read_audit"}


def test_raw_sql_delete_is_refused_too(history: Store) -> None:
    """The trigger holds below SQLAlchemy as well."""
    with pytest.raises(Conflict), history.transaction() as conn:
        conn.execute(text("DELETE FROM claim_audit WHERE audit_id = 1"))
