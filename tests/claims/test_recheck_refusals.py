"""A refused recheck says why and writes nothing (docs/ARCHITECTURE.md, "Recheck"): an
obligation whose claim has nothing to rerun, one already resolved, one of another scope or
snapshot, an unknown one, a scope without a live claim. Every table's rows are counted
before and after, on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest

from probe_service.errors import (
    Conflict,
    InvalidInput,
    NotFound,
    NotRerunnable,
    ProbeServiceError,
)
from probe_service.service import ProbeService
from probe_service.store import Store

from ..fuzz.strategies import row_counts
from .helpers import WorkTree


def _claim(svc: ProbeService, snapshot: str, scope: str, statement: str) -> str:
    """A claim resting on a source span only: nothing the service can rerun."""
    claim = {
        "scope": scope,
        "statement": statement,
        "kind": "behavior",
        "snapshot_id": snapshot,
        "evidence": [{"span": {"path": "src/parse.py", "start": 0, "end": 10}}],
        "dependencies": [{"exact_blob": {"path": "src/parse.py"}}],
    }
    return svc.claim_create(claim=claim).claim_id


@pytest.fixture
def scene(any_tree: WorkTree, any_store: Store) -> dict[str, Any]:
    """Two scopes, an edit that opens one obligation in each, one resolved by hand."""
    svc = ProbeService(any_store)
    any_tree.write("src/parse.py", "def parse(text):\n    return text.split(',')\n")
    before = any_tree.capture()
    payments = _claim(svc, before, "payments", "parse splits on commas")
    billing = _claim(svc, before, "billing", "parse splits on commas, for billing")
    resolved = _claim(svc, before, "payments", "parse is short")
    any_tree.write("src/parse.py", "def parse(text):\n    return text.split(';')\n")
    after = any_tree.capture()
    any_tree.write("src/parse.py", "def parse(text):\n    return text.split('|')\n")
    later = any_tree.capture()
    for snapshot in (after, later):
        for scope in ("payments", "billing"):
            assert not svc.gate(snapshot_id=snapshot, scope=scope).passed
    owed = {
        o.claim_id: o.obligation_id
        for o in svc.obligation_list(snapshot_id=after, state="open").obligations
    }
    svc.obligation_resolve(
        obligation_id=owed[resolved], resolution="accepted_risk", rationale="a comment only"
    )
    return {
        "svc": svc,
        "after": after,
        "later": later,
        "payments": owed[payments],
        "billing": owed[billing],
        "resolved": owed[resolved],
    }


CASES: list[tuple[str, type[ProbeServiceError], str]] = [
    ("no rerunnable evidence", NotRerunnable, "needs a person or an agent"),
    ("already resolved", Conflict, "already resolved (accepted_risk)"),
    ("other scope", InvalidInput, "is in scope 'billing', not in scope 'payments'"),
    ("other snapshot", InvalidInput, "is owed on snapshot"),
    ("unknown obligation", NotFound, "obligation_ids[0]"),
    ("scope without a live claim", InvalidInput, "no live claim in scope 'paymnets'"),
]


def _request(case: str, scene: dict[str, Any]) -> dict[str, Any]:
    after = scene["after"]
    return {
        "no rerunnable evidence": {"snapshot_id": after, "obligation_ids": [scene["payments"]]},
        "already resolved": {"snapshot_id": after, "obligation_ids": [scene["resolved"]]},
        "other scope": {
            "snapshot_id": after,
            "scope": "payments",
            "obligation_ids": [scene["billing"]],
        },
        "other snapshot": {"snapshot_id": scene["later"], "obligation_ids": [scene["payments"]]},
        "unknown obligation": {"snapshot_id": after, "obligation_ids": ["obl_" + "0" * 32]},
        "scope without a live claim": {"snapshot_id": after, "scope": "paymnets"},
    }[case]


@pytest.mark.parametrize(("case", "error", "words"), CASES, ids=[c[0] for c in CASES])
def test_a_refused_recheck_writes_nothing(
    scene: dict[str, Any],
    any_store: Store,
    case: str,
    error: type[ProbeServiceError],
    words: str,
) -> None:
    """Each bad request is refused with its own error, in words that name what is wrong,
    and every table holds the rows it held before."""
    svc: ProbeService = scene["svc"]
    before = row_counts(any_store)
    with pytest.raises(error) as refused:
        svc.obligation_recheck(**_request(case, scene))
    assert type(refused.value) is error
    assert words in str(refused.value)
    assert row_counts(any_store) == before


def test_a_sweep_lists_what_cannot_be_rerun_and_writes_no_batch(
    scene: dict[str, Any], any_store: Store
) -> None:
    """Without names, claims with nothing to rerun are listed as needing a person or an
    agent, with what they rest on; no plan, run or recheck row is written."""
    svc: ProbeService = scene["svc"]
    before = row_counts(any_store)
    report = svc.obligation_recheck(snapshot_id=scene["after"], scope="payments")
    assert report.batch_id is None
    (entry,) = report.entries
    assert (entry.obligation_id, entry.status) == (scene["payments"], "needs_person")
    assert "span src/parse.py bytes 0-10" in entry.rests_on[0]
    after = row_counts(any_store)
    for table in ("plans", "runs", "rechecks", "recheck_items", "recheck_settlements"):
        assert after[table] == before[table], table
