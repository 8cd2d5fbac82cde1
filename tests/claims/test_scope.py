"""Scope confinement: every read and write stays inside the scope it names."""

from __future__ import annotations

import pytest

from probe_service.claims import (
    ReceiptLookup,
    change_analyze,
    claim_check,
    claim_create,
    claim_show,
    claim_withdraw,
    gate,
    obligation_list,
    obligation_resolve,
    supersession_chain,
)
from probe_service.errors import NotFound
from probe_service.store import Store

from .helpers import PARSE_PY, WorkTree, claim_request


@pytest.fixture
def two_scopes(tree: WorkTree, receipts: ReceiptLookup) -> tuple[str, str, str]:
    """A stale claim in ``payments`` and one in ``billing``; returns their ids and the end."""
    start = tree.write("src/parse.py", PARSE_PY).capture()
    pay = claim_create(tree.store, claim_request(start), receipts=receipts).claim_id
    bill = claim_create(tree.store, claim_request(start, scope="billing"), receipts=receipts)
    end = tree.write("src/parse.py", "changed\n").capture()
    change_analyze(tree.store, start, end)
    return pay, bill.claim_id, end


def test_show_in_another_scope_is_not_found(store: Store, two_scopes: tuple[str, str, str]) -> None:
    """A claim id read through the wrong scope does not exist there."""
    with pytest.raises(NotFound):
        claim_show(store, two_scopes[0], scope="billing")


def test_check_in_another_scope_is_not_found(
    store: Store, two_scopes: tuple[str, str, str]
) -> None:
    """claim_check refuses ids outside the named scope."""
    with pytest.raises(NotFound):
        claim_check(store, [two_scopes[0]], two_scopes[2], scope="billing")


def test_withdraw_and_chain_are_scoped(store: Store, two_scopes: tuple[str, str, str]) -> None:
    """Writes and lineage reads through the wrong scope find nothing."""
    with pytest.raises(NotFound):
        claim_withdraw(store, two_scopes[0], "why", scope="billing")
    with pytest.raises(NotFound):
        supersession_chain(store, two_scopes[0], scope="billing")


def test_obligations_are_listed_per_scope(store: Store, two_scopes: tuple[str, str, str]) -> None:
    """Each scope lists only its own obligation."""
    assert [o.claim_id for o in obligation_list(store, scope="payments")] == [two_scopes[0]]
    assert [o.claim_id for o in obligation_list(store, scope="billing")] == [two_scopes[1]]


def test_resolve_through_another_scope_is_not_found(
    store: Store, two_scopes: tuple[str, str, str]
) -> None:
    """An obligation cannot be resolved from another scope."""
    obligation = obligation_list(store, scope="payments")[0]
    with pytest.raises(NotFound):
        obligation_resolve(store, obligation.obligation_id, "accepted_risk", "x", scope="billing")


def test_gate_of_one_scope_ignores_another(store: Store, two_scopes: tuple[str, str, str]) -> None:
    """Resolving billing's obligation opens billing's gate while payments stays closed."""
    billing = obligation_list(store, scope="billing")[0]
    obligation_resolve(store, billing.obligation_id, "accepted_risk", "reviewed", scope="billing")
    assert gate(store, two_scopes[2], scope="billing").passed
    assert not gate(store, two_scopes[2], scope="payments").passed
