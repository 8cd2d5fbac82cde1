"""Fixtures for the claims tests; stores and ``pg_url`` come from ``tests/conftest.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from probe_service.claims import ReceiptLookup
from probe_service.claims.receipts import ReceiptFacts
from probe_service.store import Store

from .helpers import STUB_RECEIPTS, WorkTree


@pytest.fixture
def store(sqlite_store: Store) -> Store:
    """The SQLite store most claims tests run against."""
    return sqlite_store


@pytest.fixture
def tree(tmp_path: Path, store: Store) -> WorkTree:
    """An empty real working tree captured into the SQLite store."""
    root = tmp_path / "work"
    root.mkdir()
    return WorkTree(root, store)


@pytest.fixture
def pg_tree(tmp_path: Path, pg_store: Store) -> WorkTree:
    """An empty real working tree captured into a fresh PostgreSQL store."""
    root = tmp_path / "pg-work"
    root.mkdir()
    return WorkTree(root, pg_store)


@pytest.fixture
def any_tree(tmp_path: Path, any_store: Store) -> WorkTree:
    """An empty real working tree captured into each backend in turn."""
    root = tmp_path / "any-work"
    root.mkdir()
    return WorkTree(root, any_store)


@pytest.fixture
def receipts() -> ReceiptLookup:
    """A dict-backed ReceiptLookup knowing outcomes only (no snapshot, no plan)."""

    def lookup(receipt_id: str) -> ReceiptFacts | None:
        outcome = STUB_RECEIPTS.get(receipt_id)
        return None if outcome is None else ReceiptFacts(outcome=outcome)

    return lookup
