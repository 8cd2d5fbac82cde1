"""The audit log: every mutation appended; no code path or SQL updates or deletes it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from sqlalchemy import delete, text, update

import probe_service.claims as claims_pkg
from probe_service.claims import (
    LocalCaller,
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
    record = claim_create(
        tree.store, claim_request(start), receipts=receipts, caller=LocalCaller(face="mcp")
    )
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
        "obligation_open",
        "claim_check",
        "change_analyze",
        "obligation_resolve",
        "claim_withdraw",
    ]
    assert entries[0].interface == "mcp"
    assert entries[0].after_digest
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


_MUTATING_SQL = re.compile(r"\bUPDATE\s+\w+\s+SET\b|\bDELETE\s+FROM\b|\bTRUNCATE\b", re.IGNORECASE)


def _offences(module: Path) -> list[str]:
    offences = []
    for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sqlalchemy"):
            names = {alias.name for alias in node.names} & {"update", "delete"}
            offences += [f"{module.name}: imports {name}" for name in names]
        elif (
            isinstance(node, ast.Attribute)
            and node.attr in ("update", "delete")
            and isinstance(node.value, ast.Name)
            and node.value.id in ("sa", "sqlalchemy")
        ):
            offences.append(f"{module.name}:{node.lineno} sa.{node.attr}")
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and _MUTATING_SQL.search(node.value)
        ):
            offences.append(f"{module.name}:{node.lineno} SQL")
    return offences


def test_no_module_updates_or_deletes_any_claims_table() -> None:
    """No module imports SQLAlchemy's update/delete or carries UPDATE/DELETE SQL."""
    package = Path(claims_pkg.__file__).parent
    assert [o for module in sorted(package.glob("*.py")) for o in _offences(module)] == []


def test_audit_module_exposes_only_append_and_read() -> None:
    """The audit module's public surface is append and read (the log, or one row of it)."""
    from probe_service.claims import audit

    assert set(audit.__all__) == {"AuditEntry", "append_audit", "audit_entry", "read_audit"}


def test_raw_sql_delete_is_refused_too(history: Store) -> None:
    """The trigger holds below SQLAlchemy as well."""
    with pytest.raises(Conflict), history.transaction() as conn:
        conn.execute(text("DELETE FROM claim_audit WHERE audit_id = 1"))


def test_the_scan_detects_a_mutation(tmp_path: Path) -> None:
    """The source scan is not vacuous: it flags an update import and DELETE SQL."""
    module = tmp_path / "bad.py"
    module.write_text('from sqlalchemy import update\nSQL = "DELETE FROM claim_audit"\n')
    assert len(_offences(module)) == 2
